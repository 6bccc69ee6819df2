# Upstream imports AutoTokenizer at module level; GPT2BPETokenizer never uses it.
AutoTokenizer = None
