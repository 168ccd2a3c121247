"""Prints one fenced code block of README.md, so that scripts run the README's own text rather
than a copy of it: `python3 scripts/readme-block.py LANG N` gives the Nth (from 0) block
fenced as ```LANG."""

import pathlib
import re
import sys

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
language, index = sys.argv[1], int(sys.argv[2])
blocks = re.findall(rf"^```{re.escape(language)}\n(.*?)^```", README.read_text(), re.S | re.M)
sys.stdout.write(blocks[index])
