"""Screenshots of an audit's report.html and Data Docs for the documentation (``docs/img/``), with headless
Chromium (Debian's ``chromium``, driven by Playwright as the browser tests do).

    kafka-offset-audit demo --output /tmp/koa-demo
    python scripts/screenshots.py /tmp/koa-demo            # writes docs/img/report.png, docs/img/data-docs.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("output", type=Path, help="an audit's output directory (reports on)")
    ap.add_argument("--dest", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "img")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=900)
    args = ap.parse_args(argv)
    pages = {"report.png": args.output / "report.html", "data-docs.png": args.output / "data_docs" / "index.html"}
    missing = [str(p) for p in pages.values() if not p.is_file()]
    if missing:
        print(f"not found: {', '.join(missing)} (run the audit with its reports on)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    args.dest.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": args.width, "height": args.height})
            for name, html in pages.items():
                page.goto(html.resolve().as_uri(), wait_until="load")
                page.screenshot(path=str(args.dest / name))
                print(args.dest / name)
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
