"""Where the example workflows are: ``examples/`` of a checkout, also shipped in the package.

``engine/bundled_examples`` links to the top-level ``examples/`` folder and is installed as
package data, so an installed (non-editable) Tether finds the same files.
"""

from __future__ import annotations

from pathlib import Path

EXAMPLES_DIR = Path(__file__).resolve().parent / "bundled_examples"
