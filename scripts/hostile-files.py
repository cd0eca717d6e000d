#!/usr/bin/env python3
"""Writes a folder of crafted files that must not take ingest down (issue 63), beside
ordinary ones, for scripts/reliability's hostile-file suite (and by hand):

    python3 scripts/hostile-files.py [--quick] DIR

`--quick` leaves out the slow ones to write or ingest (the 10,000-page file, the 1 GiB DOCX).

Each crafted file's name says what it does. Written from nothing here (stdlib only), so the
suite needs no download. The ordinary files (`good-*`) must be ingested; every other
document must be named with the limit it passed or why it cannot be read."""
import io
import os
import sys
import zipfile
import zlib


def pdf(objects, root=1):
    """A PDF of `objects` (bytes bodies, numbered from 1) with a correct xref table."""
    out = io.BytesIO()
    out.write(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % i + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for o in offsets:
        out.write(b"%010d 00000 n \n" % o)
    out.write(b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, root, xref))
    return out.getvalue()


def stream(data, extra=b"", flate=False):
    if flate:
        data = zlib.compress(data, 9)
        extra += b" /Filter /FlateDecode"
    return b"<< /Length %d%s >>\nstream\n" % (len(data), extra) + data + b"\nendstream"


FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def text_page_objects(lines, first=3):
    """Catalog (1), Pages (2) and one page per entry of `lines` (each a list of strings)."""
    objs = [None, None]
    kids = []
    font_id = first + 2 * len(lines)
    for page_lines in lines:
        content = b"BT /F1 12 Tf 72 720 Td " + b" ".join(b"(%s) Tj 0 -14 Td" % l.encode() for l in page_lines) + b" ET"
        page_id = first + len(objs) - 2
        kids.append(page_id)
        objs.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 %d 0 R >> >> /Contents %d 0 R >>"
            % (font_id, page_id + 1)
        )
        objs.append(stream(content, flate=True))
    objs.append(FONT)
    objs[0] = b"<< /Type /Catalog /Pages 2 0 R >>"
    objs[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % k for k in kids), len(kids))
    return objs


def self_drawing_form():
    # Page draws form 4, whose own resources name itself: `Do` forever.
    return pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /X 4 0 R >> /Font << /F1 6 0 R >> >> /Contents 5 0 R >>",
            stream(b"BT /F1 12 Tf 72 720 Td (loop) Tj ET /X Do", b" /Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /XObject << /X 4 0 R >> /Font << /F1 6 0 R >> >>"),
            stream(b"/X Do"),
            FONT,
        ]
    )


def forms_drawing_each_other():
    return pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /A 4 0 R >> >> /Contents 6 0 R >>",
            stream(b"/B Do", b" /Type /XObject /Subtype /Form /BBox [0 0 1 1] /Resources << /XObject << /B 5 0 R >> >>"),
            stream(b"/A Do", b" /Type /XObject /Subtype /Form /BBox [0 0 1 1] /Resources << /XObject << /A 4 0 R >> >>"),
            stream(b"/A Do"),
        ]
    )


def forms_laughing():
    # 30 forms, each drawing the next twice: 2^30 draws of a small file.
    n = 30
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /F 4 0 R >> /Font << /F1 %d 0 R >> >> /Contents %d 0 R >>"
        % (4 + n, 5 + n),
    ]
    for i in range(n):
        own = 4 + i
        nxt = own + 1 if i + 1 < n else None
        body = b"/F Do /F Do" if nxt else b"BT /F1 12 Tf 72 720 Td (ha) Tj ET"
        res = b" /Resources << /XObject << /F %d 0 R >> /Font << /F1 %d 0 R >> >>" % (nxt, 4 + n) if nxt else b" /Resources << /Font << /F1 %d 0 R >> >>" % (4 + n)
        objs.append(stream(body, b" /Type /XObject /Subtype /Form /BBox [0 0 1 1]" + res))
    objs.append(FONT)
    objs.append(stream(b"/F Do"))
    return pdf(objs)


def flate_bomb(mib, twice=False):
    # A page whose content stream inflates to `mib` MiB of spaces (inflated twice when `twice`).
    data = zlib.compress(b" " * (mib << 20), 9)
    filters = b"/FlateDecode"
    if twice:
        data = zlib.compress(data, 9)
        filters = b"[/FlateDecode /FlateDecode]"
    content = b"<< /Length %d /Filter %s >>\nstream\n" % (len(data), filters) + data + b"\nendstream"
    return pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
            content,
        ]
    )


def many_pages(n):
    return pdf(text_page_objects([[f"Page {i} holds the unique line number {i} of many."] for i in range(1, n + 1)]))


def deep_nesting(depth):
    # An array nested `depth` deep in the page's content: a parser that recurses per level
    # runs out of stack.
    content = b"[" * depth + b"]" * depth
    return pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
            stream(content, flate=True),
        ]
    )


def docx(document_xml, extra=None):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(
            "[Content_Types].xml",
            '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="xml" ContentType="application/xml"/>'
            '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
        )
        z.writestr("word/document.xml", document_xml)
        for name, data in (extra or {}).items():
            z.writestr(name, data)
    return out.getvalue()


W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def docx_bomb():
    # document.xml of 1 GiB of spaces inside one paragraph, deflated to about 1 MB.
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("word/document.xml", "w", force_zip64=True) as f:
            f.write(f"<w:document {W}><w:body><w:p><w:r><w:t>".encode())
            block = b" " * (1 << 20)
            for _ in range(1024):
                f.write(block)
            f.write(b"</w:t></w:r></w:p></w:body></w:document>")
    return out.getvalue()


def billion_laughs():
    ents = '<!ENTITY lol "lol">' + "".join(
        f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10)
    )
    return docx(f'<?xml version="1.0"?><!DOCTYPE lolz [{ents}]><w:document {W}><w:body><w:p><w:r><w:t>&lol9;</w:t></w:r></w:p></w:body></w:document>')


def good_docx():
    return docx(
        f"<w:document {W}><w:body><w:p><w:r><w:t>The greenhouse vents open at 27 degrees.</w:t></w:r></w:p></w:body></w:document>"
    )


def write(dir_, name, data):
    with open(os.path.join(dir_, name), "wb") as f:
        f.write(data)


def main():
    args = sys.argv[1:]
    quick = "--quick" in args
    args = [a for a in args if a != "--quick"]
    if len(args) != 1:
        sys.exit(__doc__)
    d = args[0]
    os.makedirs(d, exist_ok=True)
    write(d, "good-notes.md", b"# Greenhouse\n\nThe greenhouse vents open at 27 degrees and close at 18.\n")
    write(d, "good-ten-pages.pdf", many_pages(10))
    write(d, "good-vents.docx", good_docx())
    write(d, "form-draws-itself.pdf", self_drawing_form())
    write(d, "forms-draw-each-other.pdf", forms_drawing_each_other())
    write(d, "forms-drawn-a-billion-times.pdf", forms_laughing())
    write(d, "flate-bomb-128mib.pdf", flate_bomb(128))
    write(d, "flate-bomb-twice-1gib.pdf", flate_bomb(1024, twice=True))
    if not quick:
        write(d, "docx-bomb-1gib.docx", docx_bomb())
    write(d, "billion-laughs.docx", billion_laughs())
    if not quick:
        write(d, "ten-thousand-pages.pdf", many_pages(10_000))
    write(d, "nested-ten-million-deep.pdf", deep_nesting(10_000_000))
    # Links: out of the folder, to a folder above, and a loop.
    links = [("link-to-passwd.txt", "/etc/passwd"), ("link-to-etc", "/etc"), ("link-up", ".."), ("loop", ".")]
    for name, target in links:
        path = os.path.join(d, name)
        if not os.path.lexists(path):
            os.symlink(target, path)
    fifo = os.path.join(d, "a-pipe.txt")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    print(d)


if __name__ == "__main__":
    main()
