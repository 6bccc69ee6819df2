#!/usr/bin/env python3
"""Turns a plain-text corpus into JSON lines for `preprocess`: one document per paragraph.

A paragraph is a run of non-blank lines; its text keeps the lines' newlines. Standard library only,
so it runs on any machine with python3. Usage: text_to_jsonl.py INPUT.txt [OUTPUT.jsonl]
"""
import json
import sys


def paragraphs(lines):
    current = []
    for line in lines:
        if line.strip():
            current.append(line)
        elif current:
            yield "".join(current)
            current = []
    if current:
        yield "".join(current)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: text_to_jsonl.py INPUT.txt [OUTPUT.jsonl]")
    with open(sys.argv[1], encoding="utf-8", newline="") as source:
        out = open(sys.argv[2], "w", encoding="utf-8") if len(sys.argv) == 3 else sys.stdout
        for number, text in enumerate(paragraphs(source)):
            out.write(json.dumps({"text": text, "id": number}) + "\n")
        if out is not sys.stdout:
            out.close()


if __name__ == "__main__":
    main()
