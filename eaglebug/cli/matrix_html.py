"""`eaglebug matrix --format html`: one self-contained page a maintainer opens in a browser.

The matrix travels inside the page as JSON; a little script draws the table (a row per class
and role, a column per algorithm), sorts it by a clicked header, filters it by text, status and
role, and shows a row's detail (what each cell lacks, the delegate a fix would use, the call
sites, the tree's reason for a cell that does not apply) when the row is clicked. Nothing is
loaded from anywhere else: the page works offline and as a CI artifact.
"""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eaglebug.checks import Cell, Matrix

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>__TITLE__</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; margin: 0 0 .3em; }
#summary { color: #555; margin-bottom: 1em; }
#controls { display: flex; gap: 1em; margin-bottom: .8em; align-items: center; }
#filter { width: 22em; padding: .3em; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ddd; padding: .25em .5em; text-align: left; white-space: nowrap; }
th { background: #f4f4f4; cursor: pointer; user-select: none; position: sticky; top: 0; }
th.sorted-asc::after { content: " \\25B2"; } th.sorted-desc::after { content: " \\25BC"; }
tr.row { cursor: pointer; } tr.row:hover td { background: #f7f9ff; }
tr.row.selected td { background: #e8eeff; }
td.supported { color: #17692b; }
td.missing { color: #a40e0e; font-weight: 600; white-space: normal; min-width: 10em; max-width: 20em; }
td.na { color: #999; }
#detail { margin-top: 1.2em; padding: .8em 1em; border: 1px solid #ccd; background: #fafbff; }
#detail[hidden] { display: none; }
#detail h2 { font-size: 1.1em; margin: 0 0 .4em; }
#detail .cell { margin: .5em 0; }
#detail code, #detail pre { font: 12px ui-monospace, monospace; }
#detail pre { margin: .2em 0 .2em 1.5em; white-space: pre-wrap; }
</style>
</head>
<body>
<h1>__TITLE__</h1>
<div id="summary">__SUMMARY__</div>
<div id="controls">
<input id="filter" type="search" placeholder="filter: class, file or attribute">
<label>status <select id="status">
<option value="">any</option><option value="missing">lacks something</option>
<option value="supported">all supported</option></select></label>
<label>role <select id="role">
<option value="">any</option><option value="target">target</option>
<option value="draft">draft</option></select></label>
<span id="shown"></span>
</div>
<table id="matrix"><thead><tr id="head"></tr></thead><tbody id="body"></tbody></table>
<div id="detail" hidden></div>
<script id="data" type="application/json">__DATA__</script>
<script>
"use strict";
const data = JSON.parse(document.getElementById("data").textContent);
const algos = data.algorithms;
const columns = ["class", "role", ...algos];
let sortKey = "class", sortDir = 1, selected = null;
const text = (s) => String(s == null ? "" : s);
function mark(cell) {
  if (!cell) return ["", ""];
  if (cell.status === "supported") return ["ok", "supported"];
  if (cell.status === "n/a") return ["n/a", "na"];
  return ["missing " + cell.missing.map((m) => m.attribute).join(", "), "missing"];
}
function sortValue(row, key) {
  if (key === "class") return row.architecture.toLowerCase();
  if (key === "role") return row.role;
  const cell = row.cells[key];
  if (!cell) return 3;
  return {missing: 0, supported: 1, "n/a": 2}[cell.status];
}
function matches(row) {
  const q = document.getElementById("filter").value.trim().toLowerCase();
  const status = document.getElementById("status").value;
  const role = document.getElementById("role").value;
  if (role && row.role !== role) return false;
  const cells = Object.values(row.cells);
  if (status === "missing" && !cells.some((c) => c.status === "missing")) return false;
  if (status === "supported" && cells.some((c) => c.status === "missing")) return false;
  if (!q) return true;
  const hay = [row.architecture, row.class, row.file,
    ...cells.flatMap((c) => c.missing.map((m) => m.attribute))].join(" ").toLowerCase();
  return hay.includes(q);
}
function drawHead() {
  const head = document.getElementById("head");
  head.replaceChildren();
  for (const key of columns) {
    const th = document.createElement("th");
    th.textContent = key;
    th.dataset.key = key;
    if (key === sortKey) th.className = sortDir > 0 ? "sorted-asc" : "sorted-desc";
    th.addEventListener("click", () => {
      sortDir = key === sortKey ? -sortDir : 1;
      sortKey = key;
      draw();
    });
    head.appendChild(th);
  }
}
function draw() {
  drawHead();
  const rows = data.rows.filter(matches).sort((a, b) => {
    const x = sortValue(a, sortKey), y = sortValue(b, sortKey);
    if (x < y) return -sortDir;
    if (x > y) return sortDir;
    return a.architecture < b.architecture ? -1 : a.architecture > b.architecture ? 1 : 0;
  });
  const body = document.getElementById("body");
  body.replaceChildren();
  for (const row of rows) {
    const tr = document.createElement("tr");
    tr.className = "row" + (row === selected ? " selected" : "");
    tr.dataset.class = row.architecture;
    tr.dataset.role = row.role;
    const name = document.createElement("td");
    name.textContent = row.architecture;
    name.title = row.file + ":" + row.line;
    const role = document.createElement("td");
    role.textContent = row.role;
    tr.append(name, role);
    for (const algo of algos) {
      const td = document.createElement("td");
      const [label, cls] = mark(row.cells[algo]);
      td.textContent = label;
      td.className = cls;
      tr.appendChild(td);
    }
    tr.addEventListener("click", () => { selected = row; draw(); detail(row); });
    body.appendChild(tr);
  }
  document.getElementById("shown").textContent = rows.length + " of " + data.rows.length + " rows";
}
function detail(row) {
  const box = document.getElementById("detail");
  box.replaceChildren();
  const h = document.createElement("h2");
  h.textContent = row.architecture + " (" + row.role + ")";
  const where = document.createElement("div");
  where.textContent = row.class + " at " + row.file + ":" + row.line +
    (row.draft ? " · can be a draft: " + row.draft : "");
  box.append(h, where);
  for (const algo of algos) {
    const cell = row.cells[algo];
    if (!cell) continue;
    const div = document.createElement("div");
    div.className = "cell";
    div.dataset.algorithm = algo;
    const title = document.createElement("strong");
    title.textContent = algo + ": " + cell.status;
    div.appendChild(title);
    if (cell.reason) div.append(" — " + cell.reason);
    for (const f of cell.findings) {
      const p = document.createElement("div");
      p.textContent = f.severity + ": " + f.message;
      div.appendChild(p);
      for (const s of f.sites) {
        const pre = document.createElement("pre");
        pre.textContent = s;
        div.appendChild(pre);
      }
      if (f.fix) {
        const pre = document.createElement("pre");
        pre.textContent = "fix:\\n" + f.fix;
        div.appendChild(pre);
      }
    }
    box.appendChild(div);
  }
  box.hidden = false;
}
for (const id of ["filter", "status", "role"]) {
  document.getElementById(id).addEventListener("input", draw);
}
draw();
</script>
</body>
</html>
"""


def _cell(cell: Cell) -> dict[str, Any]:
    return {
        "status": cell.status,
        "missing": [m.to_json() for m in cell.missing],
        "reason": cell.reason,
        "findings": [
            {
                "severity": f.severity,
                "message": f.message,
                "sites": [f"{s.file}:{s.line}  {s.code}" for s in f.call_sites],
                "fix": f.fix.text() if f.fix is not None else None,
            }
            for f in cell.findings
        ],
    }


def page_data(matrix: Matrix) -> dict[str, Any]:
    """What the page's script reads: a row per class and role, its cells by algorithm."""
    rows = []
    for row in matrix.rows:
        for role in ("target", "draft"):
            cells = {c.algorithm: _cell(c) for c in row.cells if c.role == role}
            if cells:
                rows.append(
                    {
                        "architecture": row.architecture,
                        "class": row.class_,
                        "file": row.file,
                        "line": row.line,
                        "draft": row.draft,
                        "role": role,
                        "cells": cells,
                    }
                )
    return {"algorithms": list(matrix.algorithms), "rows": rows}


def matrix_html(matrix: Matrix) -> str:
    counts = matrix.counts()
    title = f"eaglebug support matrix · SGLang {matrix.version or 'unknown version'}"
    summary = (
        f"{len(matrix.rows)} registered classes x {len(matrix.algorithms)} speculative "
        f"algorithms: {counts['supported']} supported, {counts['missing']} missing, "
        f"{counts['n/a']} not applicable · {matrix.package_dir}"
    )
    # JSON inside <script>: "</" would end the element; "<\\/" reads back as the same string.
    data = json.dumps(page_data(matrix)).replace("</", "<\\/")
    return (
        _PAGE.replace("__TITLE__", html.escape(title))
        .replace("__SUMMARY__", html.escape(summary))
        .replace("__DATA__", data)
    )
