"""Prints one fenced code block of README.md, so that scripts run the README's own text rather
than a copy of it: `python3 scripts/readme-block.py LANG N` gives the Nth (from 0) block
fenced as ```LANG; `python3 scripts/readme-block.py --tested MARKER` gives the one block whose
`<!-- tested: ... -->` marker begins with MARKER (and fails unless exactly one does)."""

import pathlib
import re
import sys

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
if sys.argv[1] == "--tested":
    marker = sys.argv[2]
    tested = re.findall(r"<!-- tested: ([^>]*?) -->\n```\w+\n(.*?)^```", README.read_text(), re.S | re.M)
    found = [code for how, code in tested if how.startswith(marker)]
    if len(found) != 1:
        sys.exit(f"readme-block.py: {len(found)} README blocks are marked '{marker}...', one expected")
    sys.stdout.write(found[0])
else:
    language, index = sys.argv[1], int(sys.argv[2])
    blocks = re.findall(rf"^```{re.escape(language)}\n(.*?)^```", README.read_text(), re.S | re.M)
    sys.stdout.write(blocks[index])
