/* archviz: the home page's side-by-side table, sorted by a row, and the compare pages' two diagrams, scrolled
   together. No dependencies; works from file://.
   Each model is a column; selecting a row's name orders the columns by that row's values (numbers where the row
   says data-sort-row="number", else text), ascending, then descending. Cells without a value go last.
   In a [data-scroll-together] block, scrolling one diagram's box scrolls the others to the same fraction of their
   own scroll range, across and down (the diagrams differ in size, so a pixel offset would not match them).
   Without JavaScript the table reads as it is and each diagram scrolls on its own. */
(function () {
  "use strict";

  function compare(type) {
    return function (a, b) {
      if (a.key === "" || b.key === "") return (a.key === "") - (b.key === "") || a.position - b.position;
      var order = type === "number" ? Number(a.key) - Number(b.key) : a.key.localeCompare(b.key);
      return order || a.position - b.position;
    };
  }

  function sortColumns(table, header) {
    var descending = header.getAttribute("aria-sort") === "ascending";
    var cells = Array.prototype.slice.call(header.parentNode.cells, 1);
    var columns = cells.map(function (cell, position) {
      return { position: position, key: cell.getAttribute("data-sort") || "" };
    });
    columns.sort(compare(header.getAttribute("data-sort-row")));
    if (descending) {
      var present = columns.filter(function (column) { return column.key !== ""; }).reverse();
      columns = present.concat(columns.filter(function (column) { return column.key === ""; }));
    }
    var rows = table.rows;
    for (var r = 0; r < rows.length; r++) {
      var current = Array.prototype.slice.call(rows[r].cells, 1);
      for (var c = 0; c < columns.length; c++) rows[r].appendChild(current[columns[c].position]);
    }
    var headers = table.querySelectorAll("th[data-sort-row]");
    for (var h = 0; h < headers.length; h++) headers[h].removeAttribute("aria-sort");
    header.setAttribute("aria-sort", descending ? "descending" : "ascending");
  }

  function enhance(table) {
    var headers = table.querySelectorAll("th[data-sort-row]");
    for (var i = 0; i < headers.length; i++) {
      var header = headers[i];
      var button = document.createElement("button");
      button.type = "button";
      button.className = "sort-row";
      button.textContent = header.textContent;
      button.title = "Order the models by " + header.textContent;
      header.textContent = "";
      header.appendChild(button);
      button.addEventListener("click", (function (target) {
        return function () { sortColumns(table, target); };
      })(header));
    }
  }

  function fraction(position, range) {
    return range > 0 ? position / range : 0;
  }

  function scrollTogether(group) {
    var boxes = Array.prototype.slice.call(group.querySelectorAll(".dfg-scroll"));
    // Where each box was moved to follow another (null: nowhere): a scroll event of a box that is still there is that
    // move's own and is not passed on. A position, not a flag: a move that changes nothing fires no event, and a
    // reader's scroll that follows quickly may arrive as one event with it.
    var placed = boxes.map(function () { return null; });
    boxes.forEach(function (source, from) {
      source.addEventListener("scroll", function () {
        var was = placed[from];
        placed[from] = null;
        if (was && Math.abs(was[0] - source.scrollLeft) < 1 && Math.abs(was[1] - source.scrollTop) < 1) return;
        var across = fraction(source.scrollLeft, source.scrollWidth - source.clientWidth);
        var down = fraction(source.scrollTop, source.scrollHeight - source.clientHeight);
        boxes.forEach(function (target, to) {
          if (target === source) return;
          var left = Math.round(across * (target.scrollWidth - target.clientWidth));
          var top = Math.round(down * (target.scrollHeight - target.clientHeight));
          if (left === target.scrollLeft && top === target.scrollTop) return;
          target.scrollLeft = left;
          target.scrollTop = top;
          placed[to] = [target.scrollLeft, target.scrollTop];
        });
      }, { passive: true });
    });
  }

  // The same order for the gallery's rows (assets/gallery.js).
  window.ArchvizSortKeys = compare;

  document.addEventListener("DOMContentLoaded", function () {
    var tables = document.querySelectorAll("table[data-sortable-columns]");
    for (var t = 0; t < tables.length; t++) enhance(tables[t]);
    var groups = document.querySelectorAll("[data-scroll-together]");
    for (var g = 0; g < groups.length; g++) scrollTogether(groups[g]);
  });
})();
