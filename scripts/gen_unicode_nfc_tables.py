#!/usr/bin/python3
"""Generates libcore/text/unicode_nfc_tables.inc: the data of the NFC normalizer (unicode_nfc.cpp).

The Hugging Face `tokenizers` library 0.19.1 normalizes with the Rust crate
unicode-normalization-alignments, whose tables are Unicode 9.0. Normalization data of a code point
never changes once it is assigned (Unicode's stability policy), so Unicode 9.0's tables are
Python's `unicodedata` (14.0.0) restricted to the code points assigned in Unicode 9.0 or earlier;
a code point assigned later is, as in that crate, a starter (class 0) with no decomposition that
composes with nothing. This differs from a current NFC for the 98 combining marks added after 9.0
(U+07FD, U+0D3B, U+1ABF, ...: not reordered) and the composition U+11935 U+11930 -> U+11938.

Which code points Unicode 9.0 had: Perl's Unicode::UCD (Perl 5.36 carries Unicode 14.0, the same
version as `unicodedata`), property Present_In (alias In), whose value 9.0 is cumulative: every code
point assigned in 9.0 *or earlier*. Its sibling Age=9.0 is exact (only those first assigned in 9.0)
and would be wrong here. The `regex` module (2022.10.31) has no Age property at all.

Tables written (all sorted, searched by binary search or indexed directly):
  kCombiningClassRanges  {first, last, class}: code points whose canonical combining class is not 0.
  kDecompositions        {code point, offset, length} into kDecompositionPool: the full canonical
                         decomposition (NFD) of every decomposable code point except Hangul
                         syllables, which the C++ code decomposes arithmetically.
  kCompositions          {first, second, composite}: every primary composite, i.e. a code point whose
                         canonical decomposition is a pair that NFC puts back together; this leaves
                         out singletons, non-starter decompositions and CompositionExclusions.txt
                         (the derived set is checked against Perl's Full_Composition_Exclusion).
  kQuickCheckIndex / kQuickCheckBlocks  a two-level bitmap of the code points that are *not* "quick
                         yes": a quick-yes code point has class 0, is unchanged by NFC on its own
                         and is never the second of a composition (Hangul vowels and trailing
                         consonants included), so NFC never changes text made only of them and no
                         change crosses the boundary before one.
  kDecomposableIndex / kDecomposableBlocks  the same kind of bitmap of the code points that are in
                         kDecompositions, which spares most code points that table's search.

Usage: /usr/bin/python3 scripts/gen_unicode_nfc_tables.py [OUTPUT]
       (default OUTPUT: libcore/text/unicode_nfc_tables.inc)
"""
import bisect
import os
import subprocess
import sys
import unicodedata

EXPECTED_UNIDATA_VERSION = "14.0.0"
NORMALIZER_UNICODE_VERSION = "9.0"
MAX_CODE_POINT = 0x10FFFF
BLOCK_BITS = 8  # quick-check bitmap: one index entry per 256 code points
WORDS_PER_BLOCK = (1 << BLOCK_BITS) // 64
HANGUL_SYLLABLES = range(0xAC00, 0xD7A4)
HANGUL_VOWELS = range(0x1161, 0x1176)
HANGUL_TRAILING = range(0x11A8, 0x11C3)
LINE_WIDTH = 100


def perl_inversion_list(prop):
    """Perl's Unicode::UCD::prop_invlist(prop): boundaries where membership flips, starting 'in'."""
    script = 'use Unicode::UCD qw(prop_invlist); print join(" ", prop_invlist($ARGV[0])), "\\n";'
    out = subprocess.run(["perl", "-e", script, prop], capture_output=True, text=True, check=True)
    return [int(x) for x in out.stdout.split()]


def perl_unicode_version():
    script = "use Unicode::UCD; print Unicode::UCD::UnicodeVersion();"
    return subprocess.run(["perl", "-e", script], capture_output=True, text=True,
                          check=True).stdout.strip()


def member(inversion_list, cp):
    return bisect.bisect_right(inversion_list, cp) % 2 == 1


class Unicode9:
    """unicodedata's normalization data, restricted to the code points Unicode 9.0 assigned."""

    def __init__(self):
        self.assigned = perl_inversion_list(f"Present_In={NORMALIZER_UNICODE_VERSION}")

    def is_assigned(self, cp):
        return member(self.assigned, cp)

    def combining_class(self, cp):
        return unicodedata.combining(chr(cp)) if self.is_assigned(cp) else 0

    def canonical_decomposition(self, cp):
        """The one-level canonical decomposition as a list, or [] (compatibility ones excluded)."""
        if not self.is_assigned(cp):
            return []
        fields = unicodedata.decomposition(chr(cp)).split()
        if not fields or fields[0].startswith("<"):
            return []
        return [int(f, 16) for f in fields]

    def full_decomposition(self, cp):
        return [ord(c) for c in unicodedata.normalize("NFD", chr(cp))]

    def composes_back(self, cp):
        return unicodedata.normalize("NFC", chr(cp)) == chr(cp)


def combining_class_ranges(data):
    out = []
    for cp in range(MAX_CODE_POINT + 1):
        ccc = data.combining_class(cp)
        if ccc == 0:
            continue
        if out and out[-1][1] == cp - 1 and out[-1][2] == ccc:
            out[-1][1] = cp
        else:
            out.append([cp, cp, ccc])
    return out


def decompositions(data):
    """[(code point, full decomposition)] for every decomposable non-Hangul code point."""
    return [(cp, data.full_decomposition(cp)) for cp in range(MAX_CODE_POINT + 1)
            if cp not in HANGUL_SYLLABLES and data.canonical_decomposition(cp)]


def compositions(data):
    """Sorted [(first, second, composite)] of the primary composites."""
    pairs = []
    for cp in range(MAX_CODE_POINT + 1):
        parts = data.canonical_decomposition(cp)
        if cp in HANGUL_SYLLABLES or len(parts) != 2:
            continue
        if unicodedata.normalize("NFC", chr(parts[0]) + chr(parts[1])) == chr(cp):
            pairs.append((parts[0], parts[1], cp))
    return sorted(pairs)


def check_exclusions_against_perl(data, pairs):
    """Decomposable code points that are no primary composite must be exactly the full composition
    exclusions (restricted to Unicode 9.0)."""
    excluded = perl_inversion_list("Full_Composition_Exclusion")
    composites = {c for _, _, c in pairs}
    for cp in range(MAX_CODE_POINT + 1):
        if cp in HANGUL_SYLLABLES or not data.canonical_decomposition(cp):
            continue
        if (cp not in composites) != member(excluded, cp):
            raise SystemExit(f"U+{cp:04X}: derived composition exclusion disagrees with Perl's")


def quick_yes_flags(data, pairs):
    seconds = {b for _, b, _ in pairs} | set(HANGUL_VOWELS) | set(HANGUL_TRAILING)
    flags = []
    for cp in range(MAX_CODE_POINT + 1):
        if not data.is_assigned(cp):
            flags.append(True)
            continue
        flags.append(data.combining_class(cp) == 0 and cp not in seconds and
                     (0xD800 <= cp <= 0xDFFF or data.composes_back(cp)))
    check_boundaries(data, flags)
    return flags


def check_boundaries(data, flags):
    """What the C++ code relies on: nothing below U+0300 needs work, and a quick-yes code point's
    decomposition starts with a quick-yes starter (so no change crosses the boundary before it)."""
    first_not_quick_yes = flags.index(False)
    if first_not_quick_yes != 0x300:
        raise SystemExit(f"first code point that is not quick yes is U+{first_not_quick_yes:04X}")
    for cp in range(MAX_CODE_POINT + 1):
        if flags[cp] and data.canonical_decomposition(cp) and cp not in HANGUL_SYLLABLES:
            lead = data.full_decomposition(cp)[0]
            if not flags[lead] or data.combining_class(lead) != 0:
                raise SystemExit(f"U+{cp:04X} is quick yes but its decomposition starts with "
                                 f"U+{lead:04X}")


def bitmap(bits):
    """(index, blocks) of a two-level bitmap: index[cp >> 8] picks a block of four 64-bit words whose
    bit cp & 255 is bits[cp]. The index stops after the last block with a set bit."""
    blocks = [(0,) * WORDS_PER_BLOCK]
    index = []
    for start in range(0, MAX_CODE_POINT + 1, 1 << BLOCK_BITS):
        words = tuple(sum(1 << bit for bit in range(64) if bits[start + w * 64 + bit])
                      for w in range(WORDS_PER_BLOCK))
        if words not in blocks:
            blocks.append(words)
        index.append(blocks.index(words))
    while index and index[-1] == 0:
        index.pop()
    return index, blocks


def wrap(entries, indent=""):
    """Entries joined with spaces, as many per line as fit in LINE_WIDTH."""
    lines, line = [], indent
    for entry in entries:
        if line.strip() and len(line) + 1 + len(entry) > LINE_WIDTH:
            lines.append(line)
            line = indent
        line += (" " if line.strip() else "") + entry
    if line.strip():
        lines.append(line)
    return lines


def array(declaration, entries):
    return [f"constexpr {declaration}[] = {{"] + wrap(entries, "    ") + ["};"]


def render_bitmap(name, index, blocks):
    block_entries = ["{" + ", ".join(f"0x{w:X}" for w in words) + "}," for words in blocks]
    return (array(f"std::uint8_t k{name}Index", [f"{i}," for i in index]) +
            array(f"std::array<std::uint64_t, {WORDS_PER_BLOCK}> k{name}Blocks", block_entries))


def render(ccc_ranges, decomposed, pairs, quick_check, decomposable):
    pool, entries = [], []
    for cp, parts in decomposed:
        entries.append(f"{{0x{cp:X}, {len(pool)}, {len(parts)}}},")
        pool.extend(parts)
    lines = [
        "// Generated by scripts/gen_unicode_nfc_tables.py -- do not edit; rerun it instead:",
        "//   /usr/bin/python3 scripts/gen_unicode_nfc_tables.py",
        f"// Source: Python's unicodedata {EXPECTED_UNIDATA_VERSION} restricted to the code points "
        f"assigned in Unicode {NORMALIZER_UNICODE_VERSION}",
        "// (Perl Unicode::UCD's Present_In=9.0), the data of the `tokenizers` library's NFC.",
        f"// {len(ccc_ranges)} combining-class ranges, {len(decomposed)} decompositions "
        f"({len(pool)} pool code points),",
        f"// {len(pairs)} compositions; bitmaps of {len(quick_check[0])} and "
        f"{len(decomposable[0])} index entries, {len(quick_check[1])} and "
        f"{len(decomposable[1])} blocks.",
    ]
    lines += array("CombiningClassRange kCombiningClassRanges",
                   [f"{{0x{a:X}, 0x{b:X}, {c}}}," for a, b, c in ccc_ranges])
    lines += array("Decomposition kDecompositions", entries)
    lines += array("char32_t kDecompositionPool", [f"0x{c:X}," for c in pool])
    lines += array("Composition kCompositions",
                   [f"{{0x{a:X}, 0x{b:X}, 0x{c:X}}}," for a, b, c in pairs])
    lines += render_bitmap("QuickCheck", *quick_check)
    lines += render_bitmap("Decomposable", *decomposable)
    return "\n".join(lines) + "\n"


def main():
    if unicodedata.unidata_version != EXPECTED_UNIDATA_VERSION:
        raise SystemExit(f"unicodedata {unicodedata.unidata_version} found, need "
                         f"{EXPECTED_UNIDATA_VERSION}: run with Debian 12's /usr/bin/python3")
    if perl_unicode_version() != EXPECTED_UNIDATA_VERSION:
        raise SystemExit(f"Perl's Unicode::UCD is Unicode {perl_unicode_version()}, need "
                         f"{EXPECTED_UNIDATA_VERSION} (Debian 12's perl 5.36)")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    output = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "libcore", "text",
                                                                "unicode_nfc_tables.inc")
    data = Unicode9()
    pairs = compositions(data)
    check_exclusions_against_perl(data, pairs)
    decomposed = decompositions(data)
    quick_check = bitmap([not flag for flag in quick_yes_flags(data, pairs)])
    decomposable_set = {cp for cp, _ in decomposed}
    decomposable = bitmap([cp in decomposable_set for cp in range(MAX_CODE_POINT + 1)])
    for _, blocks in (quick_check, decomposable):
        if len(blocks) > 256:
            raise SystemExit(f"{len(blocks)} bitmap blocks do not fit the uint8 index")
    text = render(combining_class_ranges(data), decomposed, pairs, quick_check, decomposable)
    with open(output, "w", encoding="ascii", newline="\n") as out:
        out.write(text)


if __name__ == "__main__":
    main()
