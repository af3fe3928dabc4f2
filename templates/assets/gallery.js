/* archviz: the gallery's home page. No dependencies; works from file://.
   Sorting: a column's heading button orders the rows by that column's data-sort keys (numbers where the heading
   says data-sort-type="number", else text), ascending, then descending; rows without a key (partial, not known)
   stay last either way. Filtering: the trait checkboxes show only the rows whose data-traits hold every trait
   checked. Compare any two: the two selects (or a row's compare button, which makes its model the second and the
   second the first) lay the picked rows' figures side by side, then the config keys that differ, from
   gallery-data.js (ARCHVIZ_GALLERY: each model's config, keys dotted). Everything shown is set as
   text, never parsed as HTML. Without JavaScript the table reads as it is. Rows are ordered as assets/compare.js
   orders the home page's columns (ArchvizSortKeys), which the page loads first. */
(function () {
  "use strict";

  function sortRows(table, header, column) {
    var descending = header.getAttribute("aria-sort") === "ascending";
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows).map(function (row, position) {
      return { row: row, position: position, key: row.cells[column].getAttribute("data-sort") || "" };
    });
    rows.sort(window.ArchvizSortKeys(header.getAttribute("data-sort-type")));  // assets/compare.js's order
    if (descending) {
      var present = rows.filter(function (item) { return item.key !== ""; }).reverse();
      rows = present.concat(rows.filter(function (item) { return item.key === ""; }));
    }
    rows.forEach(function (item) { body.appendChild(item.row); });
    var headers = table.tHead.rows[0].cells;
    for (var h = 0; h < headers.length; h++) headers[h].removeAttribute("aria-sort");
    header.setAttribute("aria-sort", descending ? "descending" : "ascending");
  }

  function filterRows(table, boxes, status) {
    var wanted = boxes.filter(function (box) { return box.checked; }).map(function (box) { return box.value; });
    var shown = 0;
    var rows = table.tBodies[0].rows;
    for (var r = 0; r < rows.length; r++) {
      var traits = (rows[r].getAttribute("data-traits") || "").split(" ");
      var keep = wanted.every(function (trait) { return traits.indexOf(trait) >= 0; });
      rows[r].hidden = !keep;
      if (keep) shown++;
    }
    var names = boxes.filter(function (box) { return box.checked; }).map(function (box) {
      return box.parentNode.textContent.trim();
    });
    status.textContent = names.length
      ? "Showing " + shown + " of " + rows.length + " models: those with " + names.join(" and ") + "."
      : "Showing all " + rows.length + " models.";
  }

  function element(tag, text, className) {
    var node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    if (className) node.className = className;
    return node;
  }

  function cellText(cell) {
    var parts = [];
    for (var i = 0; i < cell.childNodes.length; i++) {
      var child = cell.childNodes[i];
      if (child.nodeType === 3) parts.push(child.textContent.trim());
      else if (child.classList && child.classList.contains("sub")) parts.push("(" + child.textContent.trim() + ")");
      else if (child.tagName === "A") parts.push(child.textContent.trim());
    }
    return parts.filter(function (part) { return part; }).join(" ");
  }

  var TEXT = "text_config.";

  function hasText(config) {
    return Object.keys(config).some(function (key) { return key.indexOf(TEXT) === 0; });
  }

  // text_config.hidden_size read as hidden_size, unless the wrapper has a hidden_size of its own.
  function lifted(config) {
    var out = {};
    Object.keys(config).forEach(function (key) {
      var bare = key.indexOf(TEXT) === 0 ? key.slice(TEXT.length) : key;
      out[bare in config ? key : bare] = config[key];
    });
    return out;
  }

  function valueText(value) {
    return value === undefined ? "(not set)" : JSON.stringify(value);
  }

  function comparison(table, a, b) {
    var out = document.createDocumentFragment();
    var rowA = table.querySelector('tr[data-slug="' + a + '"]');
    var rowB = table.querySelector('tr[data-slug="' + b + '"]');
    if (!rowA || !rowB) return out;
    var titleA = rowA.cells[0].querySelector("a").textContent;
    var titleB = rowB.cells[0].querySelector("a").textContent;
    var figures = element("table");
    figures.appendChild(element("caption", "Figures: " + titleA + " and " + titleB));
    var head = figures.createTHead().insertRow();
    ["Figure", titleA, titleB].forEach(function (text) {
      var th = element("th", text);
      th.scope = "col";
      head.appendChild(th);
    });
    var headers = table.tHead.rows[0].cells;
    var body = figures.createTBody();
    for (var c = 1; c < headers.length - 1; c++) {  // every figure; not the witnesses
      var left = cellText(rowA.cells[c]), right = cellText(rowB.cells[c]);
      var row = body.insertRow();
      if (left !== right) row.className = "differs";
      var label = element("th", headers[c].textContent.trim());
      label.scope = "row";
      row.appendChild(label);
      row.appendChild(element("td", left));
      row.appendChild(element("td", right));
    }
    out.appendChild(figures);
    var configs = window.ARCHVIZ_GALLERY || {};
    var left = configs[a] || {}, right = configs[b] || {};
    // A wrapper (Kimi-K2.5, Qwen3.5) keeps its language model's keys under text_config: against a model that has
    // none, they are compared with that model's own keys, and the wrapper's key is named as it writes it.
    var leftWraps = hasText(left), rightWraps = hasText(right);
    if (leftWraps !== rightWraps) {
      left = leftWraps ? lifted(left) : left;
      right = rightWraps ? lifted(right) : right;
    }
    var keys = Object.keys(left).concat(Object.keys(right).filter(function (key) { return !(key in left); })).sort();
    var differing = keys.filter(function (key) { return JSON.stringify(left[key]) !== JSON.stringify(right[key]); });
    var keysTable = element("table");
    var lift = leftWraps !== rightWraps
      ? "; " + (leftWraps ? titleA : titleB) + "'s text_config keys beside the other's own"
      : "";
    keysTable.appendChild(element("caption",
      differing.length + " of " + keys.length + " config keys differ (as each config.json writes them" + lift + ")"));
    var keysHead = keysTable.createTHead().insertRow();
    ["key", titleA, titleB].forEach(function (text) {
      var th = element("th", text);
      th.scope = "col";
      keysHead.appendChild(th);
    });
    var keysBody = keysTable.createTBody();
    differing.forEach(function (key) {
      var row = keysBody.insertRow();
      var label = element("th", key);
      label.scope = "row";
      row.appendChild(label);
      row.appendChild(element("td", valueText(left[key])));
      row.appendChild(element("td", valueText(right[key])));
    });
    out.appendChild(keysTable);
    return out;
  }

  function enhance() {
    var table = document.querySelector("[data-gallery-table]");
    if (!table) return;
    var headers = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(table.querySelectorAll("button[data-sort-column]"), function (button) {
      var column = Number(button.getAttribute("data-sort-column"));
      button.addEventListener("click", function () { sortRows(table, headers[column], column); });
    });
    var boxes = Array.prototype.slice.call(document.querySelectorAll("input[data-trait-filter]"));
    var status = document.getElementById("gallery-count");
    boxes.forEach(function (box) {
      box.addEventListener("change", function () { filterRows(table, boxes, status); });
    });
    var pickA = document.getElementById("pick-a"), pickB = document.getElementById("pick-b");
    var result = document.getElementById("pick-result");
    function update() {
      result.textContent = "";
      result.appendChild(comparison(table, pickA.value, pickB.value));
    }
    if (pickA && pickB && result) {
      pickA.addEventListener("change", update);
      pickB.addEventListener("change", update);
      var picked = 0;  // the comparison is brought into view after every second pick, once both are chosen
      Array.prototype.forEach.call(table.querySelectorAll("button[data-pick]"), function (button) {
        button.addEventListener("click", function () {
          pickA.value = pickB.value;
          pickB.value = button.getAttribute("data-pick");
          update();
          picked += 1;
          if (picked % 2 === 0) document.getElementById("pick-heading").scrollIntoView();
        });
      });
      update();
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", enhance);
  else enhance();
})();
