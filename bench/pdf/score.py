"""Words recovered in order: the longest common subsequence of the source's words and the
extracted text's words, over the source's words. Words are lower-cased, NFKC-normalised (a
ligature `ﬁ` reads `fi`, `’` reads `'`) and stripped of the punctuation around them; a word hyphenated at a
line's end is joined (`wel-` + `comed`), as a reader of the PDF would read it.

    python3 bench/pdf/score.py SOURCE.md EXTRACTED.txt   # prints recall, source words, extracted words
"""
import re
import sys
import unicodedata


# A typeset apostrophe or quote is the same word as a typed one (TeX sets ' as ’).
QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def source_words(md):
    out = []
    for line in md.splitlines():
        t = line.strip()
        if re.fullmatch(r"\|?\s*:?-{3,}.*", t):
            continue  # a table's delimiter row
        t = re.sub(r"^#+\s+|^[-*+]\s+|^\d+[.)]\s+", "", t).replace("|", " ")
        out.extend(words(t))
    return out


def words(text):
    text = unicodedata.normalize("NFKC", text).translate(QUOTES)
    text = re.sub(r"(\w)-\s*\n\s*(\w)", r"\1\2", text)
    return [w for w in (re.sub(r"^\W+|\W+$", "", w).lower() for w in text.split()) if w]


def lcs(a, b):
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def recall(source, extracted):
    s, e = source_words(source), words(extracted)
    return lcs(s, e) / len(s), len(s), len(e)


if __name__ == "__main__":
    r, ns, ne = recall(open(sys.argv[1]).read(), open(sys.argv[2]).read())
    print(f"{r:.4f} {ns} {ne}")
