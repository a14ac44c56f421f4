"""Make a Great Expectations Data Docs site open complete with no network.

GX's page templates load Bootstrap, jQuery, Font Awesome, bootstrap-table, a date picker and Vega from
public CDNs, and the logo from S3; on an air-gapped host (or any audit read later offline) the pages
then show no tables.  :func:`make_offline` rewrites every page of the site to load local copies from
``static/vendor/`` instead:

* jQuery 3.7.1, Bootstrap 4.5 (``bootstrap.bundle`` includes Popper) and Font Awesome 6 come from the
  XStatic packages on PyPI (``xstatic-jquery``, ``xstatic-bootstrap``, ``xstatic-font-awesome``);
* bootstrap-table is not packaged for Python: ``koa-table.js`` (below) is a small stand-in that renders
  the tables GX builds with ``$(...).bootstrapTable({columns, data, sortName, sortOrder})`` -- the
  validation and suite lists of ``index.html`` -- with their row links, without the filter controls;
* the GX logo is the copy GX ships in ``static/images/``;
* everything else remote (Vega: our suites render no charts; the date picker; the dark theme) is
  dropped.  Links (``<a href>``) are left alone: they are not loaded.
"""

from __future__ import annotations

import os
import re
import shutil
from typing import Dict


__all__ = [
    "VENDOR_DIR",
    "make_offline",
]

VENDOR_DIR = os.path.join("static", "vendor")

_TABLE_SHIM = r"""/* kafka-offset-audit: stand-in for bootstrap-table's $(...).bootstrapTable(options) in GX Data Docs. */
(function ($) {
  if (!$ || $.fn.bootstrapTable) { return; }
  function sortKey(row, col) { var v = row[col.sortName || col.field]; return v === undefined ? null : v; }
  $.fn.bootstrapTable = function (options) {
    if (typeof options !== "object" || options === null) { return this; }  /* methods: nothing to do */
    var cols = options.columns || [], data = (options.data || []).slice();
    if (options.sortName) {
      var col = cols.filter(function (c) { return c.field === options.sortName; })[0] || {field: options.sortName};
      var dir = options.sortOrder === "desc" ? -1 : 1;
      data.sort(function (a, b) {
        var x = sortKey(a, col), y = sortKey(b, col);
        return (x === y ? 0 : (x === null ? -1 : (y === null ? 1 : (x < y ? -1 : 1)))) * dir;
      });
    }
    return this.each(function () {
      var table = $(this).empty().addClass("table table-sm table-hover");
      var head = $("<tr>");
      cols.forEach(function (c) { head.append($("<th>").text(c.title || c.field)); });
      var body = $("<tbody>");
      data.forEach(function (row) {
        var tr = $("<tr>");
        cols.forEach(function (c) { tr.append($("<td>").html(row[c.field] === undefined ? "" : String(row[c.field]))); });
        if (row._table_row_link_path) {
          tr.addClass("clickable-row").attr("data-href", row._table_row_link_path).css("cursor", "pointer")
            .on("click", function () { window.location = row._table_row_link_path; });
        }
        body.append(tr);
      });
      table.append($("<thead>").append(head)).append(body);
    });
  };
})(window.jQuery);
"""


def _vendor_files() -> Dict[str, str]:
    """Destination (under static/vendor) -> source file of the bundled assets."""
    import xstatic.pkg.bootstrap as bootstrap
    import xstatic.pkg.font_awesome as font_awesome
    import xstatic.pkg.jquery as jquery

    files = {
        "jquery.min.js": os.path.join(jquery.BASE_DIR, "jquery.min.js"),
        "bootstrap.bundle.min.js": os.path.join(bootstrap.BASE_DIR, "js", "bootstrap.bundle.min.js"),
        "bootstrap.min.css": os.path.join(bootstrap.BASE_DIR, "css", "bootstrap.min.css"),
        "fontawesome/css/all.min.css": os.path.join(font_awesome.BASE_DIR, "css", "all.min.css"),
    }
    fonts = os.path.join(font_awesome.BASE_DIR, "webfonts")
    for name in os.listdir(fonts):
        files[f"fontawesome/webfonts/{name}"] = os.path.join(fonts, name)
    return files


# (pattern on the remote URL, local file under static/vendor or None to drop the tag)
_RULES = [
    (re.compile(r"bootstrap-table[^\"']*\.js"), "koa-table.js"),
    (re.compile(r"jquery[^\"'/]*\.min\.js"), "jquery.min.js"),
    (
        re.compile(r"/bootstrap(?:@[^/]*)?/[^\"']*bootstrap\.min\.js|bootstrapcdn\.com/bootstrap/[^\"']*\.js"),
        "bootstrap.bundle.min.js",
    ),
    (re.compile(r"bootstrapcdn\.com/bootstrap/[^\"']*bootstrap\.min\.css"), "bootstrap.min.css"),
    (re.compile(r"font-?awesome[^\"']*all\.min\.css"), "fontawesome/css/all.min.css"),
]
_TAG = re.compile(
    r"<(script|link|img)\b[^>]*?(?:src|href)=[\"'](https?:)?//[^\"']*[\"'][^>]*?>(?:\s*</script>)?", re.IGNORECASE
)
_URL = re.compile(r"(?:src|href)=[\"']((?:https?:)?//[^\"']*)[\"']", re.IGNORECASE)


def _rewrite(html: str, rel: str) -> tuple[str, int, int]:
    """Rewrite one page; ``rel`` is the path from the page to the site root (``""``, ``"../../"``).

    Returns
    -------
    tuple
        (html, tags pointed at local files, tags dropped).
    """
    counts = [0, 0]

    def sub(m: re.Match) -> str:
        tag, url = m.group(1).lower(), _URL.search(m.group(0)).group(1)  # type: ignore[union-attr]  # _TAG holds _URL
        if tag == "img":
            if "great-expectations" in url and "logo" in url:
                counts[0] += 1
                return re.sub(r"src=[\"'][^\"']*[\"']", f'src="{rel}static/images/logo-long.png"', m.group(0))
            counts[1] += 1
            return ""
        for pattern, local in _RULES:
            if pattern.search(url):
                counts[0] += 1
                path = f"{rel}{VENDOR_DIR}/{local}"
                if tag == "script":
                    return f'<script src="{path}"></script>'
                return f'<link rel="stylesheet" href="{path}">'
        if tag == "link" and not re.search(r"rel=[\"']?stylesheet", m.group(0), re.IGNORECASE):
            return m.group(0)  # not loaded (e.g. a canonical link)
        counts[1] += 1
        return ""

    return _TAG.sub(sub, html), counts[0], counts[1]


def make_offline(site_dir: str) -> dict:
    """Bundle the assets into ``<site_dir>/static/vendor/`` and rewrite every ``*.html`` under ``site_dir``.

    The pages then use the bundled assets (see the module docstring).

    Returns
    -------
    dict
        ``{"pages", "localised", "dropped"}`` (counts).

    Raises
    ------
    FileNotFoundError
        ``site_dir`` has no ``index.html``.
    ImportError
        An XStatic package is missing.
    """
    if not os.path.isfile(os.path.join(site_dir, "index.html")):
        raise FileNotFoundError(f"no Data Docs site at {site_dir} (index.html missing)")
    vendor = os.path.join(site_dir, VENDOR_DIR)
    for dest, src in _vendor_files().items():
        target = os.path.join(vendor, dest)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(src, target)
    with open(os.path.join(vendor, "koa-table.js"), "w", encoding="utf-8") as fh:
        fh.write(_TABLE_SHIM)
    pages = localised = dropped = 0
    for root, _dirs, names in os.walk(site_dir):
        for name in names:
            if not name.endswith(".html"):
                continue
            path = os.path.join(root, name)
            depth = os.path.relpath(root, site_dir).count(os.sep) + (0 if root == site_dir else 1)
            with open(path, encoding="utf-8") as fh:
                page = fh.read()
            page, n_local, n_drop = _rewrite(page, "../" * depth)
            tmp = path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(page)
            os.replace(tmp, path)
            pages, localised, dropped = pages + 1, localised + n_local, dropped + n_drop
    return {"pages": pages, "localised": localised, "dropped": dropped}
