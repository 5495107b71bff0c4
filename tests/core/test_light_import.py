"""``import fleet.core`` stays light: no web server, no browser stack."""

from __future__ import annotations

import subprocess
import sys


def test_core_import_pulls_no_heavy_modules() -> None:
    code = (
        "import sys, fleet.core, fleet.core.browser, fleet.backends\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in "
        "('fastapi', 'uvicorn', 'starlette', 'playwright', 'prometheus_client')]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
