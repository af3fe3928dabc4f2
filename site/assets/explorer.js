/* archviz: the overview's data-flow diagram as an explorer. Zoom, pan, fit, a minimap, folding groups, find, a side
   panel with each box's card in brief, colour by parameters or prefill FLOPs, and #node=<id> permalinks. Everything
   it shows comes from the page (the SVG and its <template class="brief-card"> elements); without JavaScript the
   diagram is a plain scrolling SVG. No dependencies; works from file://. */
(function () {
  "use strict";
  var MIN_SCALE = 0.05;
  var MAX_SCALE = 6;
  var STEP = 1.25; // one zoom click
  var PAN = 60; // pixels an arrow key moves the view
  var DRAG = 4; // pixels a press moves before it is a drag, not a click
  var READABLE = 1; // the scale a found or chosen box is shown at, at least
  // The diagram opens at a scale its smallest text (the edges' 10-unit labels) is drawn at 11 px or more, and a
  // small diagram at no more than 1.5 times its size: the whole of it when that fits, else the top of the flow.
  var OPEN_LEAST = 1.1;
  var OPEN_MOST = 1.5;
  var BINS = 6; // colours of the sequential scale (archviz.css: --heat-0 to --heat-5)
  var NODE = "dfg-n-";
  var HEAT_CLASSES = ["heat", "heat-none", "heat-0", "heat-1", "heat-2", "heat-3", "heat-4", "heat-5"];

  // ``1.2 M``: a rounded number for the colour scale's legend.
  function shortNumber(value) {
    var units = [[1e12, " T"], [1e9, " B"], [1e6, " M"], [1e3, " k"]];
    for (var i = 0; i < units.length; i++) {
      if (value >= units[i][0]) return (value / units[i][0]).toPrecision(3).replace(/\.?0+$/, "") + units[i][1];
    }
    return String(Math.round(value));
  }

  function start(root) {
    var box = root.querySelector("#diagram");
    var svg = box && box.querySelector("svg.dfg");
    if (!svg) return;
    var viewBox = (svg.getAttribute("viewBox") || "").split(/[\s,]+/).map(Number);
    if (viewBox.length !== 4 || !(viewBox[2] > 0 && viewBox[3] > 0)) return;
    var full = { x: viewBox[0], y: viewBox[1], w: viewBox[2], h: viewBox[3] };
    var view = { x: full.x, y: full.y, k: 1 };
    var stage = root.querySelector(".explorer-stage");
    var panel = root.querySelector("#explorer-panel");
    var panelBody = panel.querySelector(".explorer-panel-body");
    var minimap = root.querySelector(".explorer-minimap");
    var cards = {};
    var templates = document.querySelectorAll("template.brief-card");
    for (var i = 0; i < templates.length; i++) cards[templates[i].getAttribute("data-node")] = templates[i];
    var selected = null;
    var matches = [];
    var current = -1;
    var folded = [];
    root.classList.add("explorer-on");
    // The view moves by its viewBox only: a jump to a fragment inside the box must not scroll the box itself.
    box.addEventListener("scroll", function () {
      box.scrollLeft = 0;
      box.scrollTop = 0;
    });

    // -- the view: a viewBox with the viewport's proportions, so one unit is ``view.k`` pixels both ways ----------

    function size() {
      return { w: box.clientWidth || 1, h: box.clientHeight || 1 };
    }

    function clamp(value, low, high) {
      return Math.min(high, Math.max(low, value));
    }

    function apply() {
      var port = size();
      var w = port.w / view.k;
      var h = port.h / view.k;
      // The view's centre stays over the diagram: it can be moved to any edge, never lost.
      view.x = clamp(view.x, full.x - w / 2, full.x + full.w - w / 2);
      view.y = clamp(view.y, full.y - h / 2, full.y + full.h - h / 2);
      svg.setAttribute("viewBox", [view.x, view.y, w, h].map(function (n) { return n.toFixed(2); }).join(" "));
      svg.setAttribute("data-scale", view.k.toFixed(4));
      drawMinimapView();
    }

    // The bounds of an element in diagram units, measured where the browser draws it.
    function bounds(element) {
      var frame = svg.getBoundingClientRect();
      var rect = element.getBoundingClientRect();
      return {
        x: view.x + (rect.left - frame.left) / view.k,
        y: view.y + (rect.top - frame.top) / view.k,
        w: rect.width / view.k,
        h: rect.height / view.k
      };
    }

    function show(area, most) {
      var port = size();
      view.k = clamp(Math.min(port.w / area.w, port.h / area.h) * 0.96, MIN_SCALE, most || MAX_SCALE);
      view.x = area.x + area.w / 2 - port.w / view.k / 2;
      view.y = area.y + area.h / 2 - port.h / view.k / 2;
      apply();
    }

    function fit() {
      show(full);
    }

    // The opening view (OPEN_LEAST, OPEN_MOST): the whole diagram when it fits at a readable scale; else its top, the
    // whole width when that fits, else centred across on the first box of the flow.
    function open() {
      fit(); // the view in place first: bounds() measures where the browser draws under it
      var port = size();
      var fitted = Math.min(port.w / full.w, port.h / full.h) * 0.96;
      var first = svg.querySelector("[id^='" + NODE + "']");
      var spine = first ? bounds(first) : null;
      view.k = clamp(fitted, OPEN_LEAST, OPEN_MOST);
      var w = port.w / view.k;
      var h = port.h / view.k;
      var across = full.w <= w || !spine ? full.x + full.w / 2 : spine.x + spine.w / 2;
      view.x = across - w / 2;
      view.y = full.h <= h ? full.y + full.h / 2 - h / 2 : full.y;
      apply();
    }

    function zoomAt(factor, px, py) {
      var port = size();
      px = px === undefined ? port.w / 2 : px;
      py = py === undefined ? port.h / 2 : py;
      var ux = view.x + px / view.k;
      var uy = view.y + py / view.k;
      view.k = clamp(view.k * factor, MIN_SCALE, MAX_SCALE);
      view.x = ux - px / view.k;
      view.y = uy - py / view.k;
      apply();
    }

    function panBy(dx, dy) {
      view.x += dx / view.k;
      view.y += dy / view.k;
      apply();
    }

    // Centre an element, zoomed in to a readable scale if the view is further out.
    function centreOn(element) {
      reveal(element);
      var area = bounds(element);
      var port = size();
      view.k = Math.max(view.k, Math.min(READABLE, port.w / area.w, port.h / area.h));
      view.x = area.x + area.w / 2 - port.w / view.k / 2;
      view.y = area.y + area.h / 2 - port.h / view.k / 2;
      apply();
    }

    // -- the minimap: a copy of the SVG without ids or links, and the visible region drawn over it -----------------

    var miniFrame = null;
    var mini = null;

    function buildMinimap() {
      mini = svg.cloneNode(true);
      mini.setAttribute("viewBox", [full.x, full.y, full.w, full.h].join(" "));
      mini.removeAttribute("role");
      mini.setAttribute("class", "dfg explorer-mini");
      var named = mini.querySelectorAll("[id]");
      for (var i = 0; i < named.length; i++) named[i].removeAttribute("id");
      var links = mini.querySelectorAll("a");
      for (var j = 0; j < links.length; j++) {
        links[j].removeAttribute("href");
        links[j].removeAttributeNS("http://www.w3.org/1999/xlink", "href");
        links[j].removeAttributeNS("http://www.w3.org/1999/xlink", "title");
      }
      var title = mini.querySelector("title");
      if (title) title.parentNode.removeChild(title);
      miniFrame = document.createElement("div");
      miniFrame.className = "explorer-minimap-view";
      minimap.appendChild(mini);
      minimap.appendChild(miniFrame);
      sizeMinimap();
      var pressed = false;
      function moveTo(event) {
        var rect = mini.getBoundingClientRect();
        var port = size();
        var ux = full.x + ((event.clientX - rect.left) / rect.width) * full.w;
        var uy = full.y + ((event.clientY - rect.top) / rect.height) * full.h;
        view.x = ux - port.w / view.k / 2;
        view.y = uy - port.h / view.k / 2;
        apply();
      }
      minimap.addEventListener("pointerdown", function (event) {
        pressed = true;
        if (minimap.setPointerCapture) minimap.setPointerCapture(event.pointerId);
        moveTo(event);
        event.preventDefault();
      });
      minimap.addEventListener("pointermove", function (event) {
        if (pressed) moveTo(event);
      });
      minimap.addEventListener("pointerup", function () { pressed = false; });
      minimap.addEventListener("pointercancel", function () { pressed = false; });
    }

    function sizeMinimap() {
      var most = window.innerWidth < 640 ? 90 : 150;
      var scale = most / Math.max(full.w, full.h);
      mini.style.width = (full.w * scale).toFixed(1) + "px";
      mini.style.height = (full.h * scale).toFixed(1) + "px";
    }

    function drawMinimapView() {
      if (!miniFrame) return;
      var port = size();
      var scale = parseFloat(mini.style.width) / full.w;
      miniFrame.style.left = ((view.x - full.x) * scale).toFixed(1) + "px";
      miniFrame.style.top = ((view.y - full.y) * scale).toFixed(1) + "px";
      miniFrame.style.width = ((port.w / view.k) * scale).toFixed(1) + "px";
      miniFrame.style.height = ((port.h / view.k) * scale).toFixed(1) + "px";
    }

    // -- pan by dragging, zoom with Ctrl/⌘ + wheel, keys when the diagram has focus ---------------------------------

    var press = null;
    var dragged = false;
    box.addEventListener("pointerdown", function (event) {
      if (event.button !== 0) return;
      press = { x: event.clientX, y: event.clientY, vx: view.x, vy: view.y, id: event.pointerId };
      dragged = false;
    });
    box.addEventListener("pointermove", function (event) {
      if (!press) return;
      var dx = event.clientX - press.x;
      var dy = event.clientY - press.y;
      if (!dragged && Math.abs(dx) + Math.abs(dy) < DRAG) return;
      if (!dragged && box.setPointerCapture) box.setPointerCapture(press.id);
      dragged = true;
      box.classList.add("dragging");
      view.x = press.vx - dx / view.k;
      view.y = press.vy - dy / view.k;
      apply();
    });
    function release() {
      press = null;
      box.classList.remove("dragging");
    }
    box.addEventListener("pointerup", function () {
      release();
      window.setTimeout(function () { dragged = false; }, 0); // after the click that ends the drag, if any
    });
    box.addEventListener("pointercancel", release);
    box.addEventListener("dragstart", function (event) { event.preventDefault(); }); // links move the view, not away
    box.addEventListener("click", function (event) {
      if (dragged) { // the end of a drag is not a click on the box under it
        dragged = false;
        event.preventDefault();
        event.stopPropagation();
      }
    }, true);
    box.addEventListener("wheel", function (event) {
      if (!(event.ctrlKey || event.metaKey)) return; // a plain wheel scrolls the page past the diagram
      event.preventDefault();
      var frame = box.getBoundingClientRect();
      zoomAt(Math.pow(STEP, -event.deltaY / 100), event.clientX - frame.left, event.clientY - frame.top);
    }, { passive: false });
    var KEYS = {
      ArrowLeft: function () { panBy(-PAN, 0); },
      ArrowRight: function () { panBy(PAN, 0); },
      ArrowUp: function () { panBy(0, -PAN); },
      ArrowDown: function () { panBy(0, PAN); },
      "+": function () { zoomAt(STEP); },
      "=": function () { zoomAt(STEP); },
      "-": function () { zoomAt(1 / STEP); },
      "0": fit,
      Escape: function () { closePanel(); }
    };
    box.addEventListener("keydown", function (event) {
      if (event.ctrlKey || event.metaKey || event.altKey || !KEYS[event.key]) return;
      event.preventDefault();
      KEYS[event.key]();
    });
    // A box reached with Tab is brought into view.
    svg.addEventListener("focusin", function (event) {
      if (!event.target.matches(":focus-visible")) return;
      var frame = box.getBoundingClientRect();
      var rect = event.target.getBoundingClientRect();
      if (rect.left < frame.left || rect.right > frame.right || rect.top < frame.top || rect.bottom > frame.bottom) {
        centreOn(event.target.closest("g") || event.target);
      }
    });

    // -- the side panel and permalinks -----------------------------------------------------------------------------

    function nodeOf(element) {
      var group = element && element.closest("[id^='" + NODE + "']");
      if (!group || !svg.contains(group)) return null;
      var id = group.id.slice(NODE.length);
      return cards[id] ? id : null;
    }

    function select(id, centre) {
      var element = document.getElementById(NODE + id);
      if (!element || !cards[id]) return false;
      if (selected) selected.classList.remove("selected");
      selected = element;
      element.classList.add("selected");
      while (panelBody.firstChild) panelBody.removeChild(panelBody.firstChild);
      panelBody.appendChild(cards[id].content.cloneNode(true));
      panel.hidden = false;
      if (window.history && window.history.replaceState) {
        window.history.replaceState(null, "", "#node=" + encodeURIComponent(id));
      }
      if (centre) centreOn(element);
      keepClear(element);
      return true;
    }

    // The selected box stays in sight beside its panel: where the panel covers it (on a phone the panel fills the
    // lower part of the diagram), the view moves it to the middle of the largest part the panel leaves free.
    function keepClear(element) {
      var frame = box.getBoundingClientRect();
      var covers = panel.getBoundingClientRect();
      var r = element.getBoundingClientRect();
      if (!(r.right > covers.left && r.left < covers.right && r.bottom > covers.top && r.top < covers.bottom)) return;
      var areas = [
        { x: frame.left, y: frame.top, w: frame.width, h: covers.top - frame.top },
        { x: frame.left, y: covers.bottom, w: frame.width, h: frame.bottom - covers.bottom },
        { x: frame.left, y: frame.top, w: covers.left - frame.left, h: frame.height },
        { x: covers.right, y: frame.top, w: frame.right - covers.right, h: frame.height }
      ].filter(function (area) { return area.w > 0 && area.h > 0; });
      if (!areas.length) return;
      var fits = areas.filter(function (area) { return area.w >= r.width && area.h >= r.height; });
      var best = (fits.length ? fits : areas).sort(function (a, b) { return b.w * b.h - a.w * a.h; })[0];
      panBy(r.left + r.width / 2 - (best.x + best.w / 2), r.top + r.height / 2 - (best.y + best.h / 2));
    }

    function closePanel() {
      if (panel.hidden) return;
      panel.hidden = true;
      if (selected) selected.classList.remove("selected");
      selected = null;
      if (window.history && window.history.replaceState && /^#node=/.test(window.location.hash)) {
        window.history.replaceState(null, "", window.location.pathname + window.location.search);
      }
    }

    svg.addEventListener("click", function (event) {
      if (event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return; // a new tab still opens
      var id = nodeOf(event.target);
      if (id === null) return;
      event.preventDefault();
      select(id, false);
    });

    // ``#node=<id>`` selects a box; ``#dfg-n-<id>`` (a card's way back) centres it; ``#dfg-g-<id>`` (the groups
    // table) opens its group.
    function follow(hash) {
      var match = /^#node=(.+)$/.exec(hash);
      if (match) return select(decodeURIComponent(match[1]), true);
      var target = null;
      try {
        target = hash.length > 1 ? document.getElementById(decodeURIComponent(hash.slice(1))) : null;
      } catch (error) {
        target = null; // a malformed escape in the address
      }
      if (!target || !svg.contains(target)) return false;
      if (target.classList.contains("cluster")) openGroup(target);
      else centreOn(target);
      return true;
    }

    // -- folding groups: the fold button draws the chosen group as one box, its frame filled and named, over everything
    //    drawn inside it (the layout stays): an edge into or out of the group ends at the box's border ----------------

    var clusters = Array.prototype.slice.call(svg.querySelectorAll("g.cluster"));
    var drawn = Array.prototype.slice.call(svg.querySelectorAll("g.node, g.edge, g.cluster"));

    function inside(inner, outer) {
      return inner.x >= outer.x - 0.5 && inner.y >= outer.y - 0.5 &&
        inner.x + inner.w <= outer.x + outer.w + 0.5 && inner.y + inner.h <= outer.y + outer.h + 0.5;
    }

    function outline(cluster) {
      return bounds(cluster.querySelector("path, polygon") || cluster);
    }

    function refold() {
      for (var i = 0; i < drawn.length; i++) drawn[i].classList.remove("folded-away");
      for (var j = 0; j < folded.length; j++) {
        var area = outline(folded[j]);
        for (var k = 0; k < drawn.length; k++) {
          if (drawn[k] !== folded[j] && inside(bounds(drawn[k]), area)) drawn[k].classList.add("folded-away");
        }
      }
    }

    // The box a folded group is drawn as: a copy of its frame and its name, after everything else in the diagram so
    // that it covers the ends of the edges that cross its border; a click on it unfolds the group.
    var SVG_NS = "http://www.w3.org/2000/svg";

    function cover(cluster) {
      var box = document.createElementNS(SVG_NS, "g");
      box.setAttribute("class", "fold-cover");
      box.setAttribute("data-cover", cluster.id);
      var frame = cluster.querySelector("path, polygon");
      var copy = frame ? box.appendChild(frame.cloneNode(false)) : null;
      Array.prototype.forEach.call(cluster.querySelectorAll("text"), function (text) {
        box.appendChild(text.cloneNode(true));
      });
      var title = document.createElementNS(SVG_NS, "title");
      title.textContent = label(cluster) + " (folded: click to unfold)";
      box.insertBefore(title, box.firstChild);
      box.addEventListener("click", function (event) {
        event.stopPropagation();
        setFolded(cluster, false);
      });
      cluster.parentNode.appendChild(box);
      if (copy) {
        var area = copy.getBBox();
        var note = document.createElementNS(SVG_NS, "text");
        note.setAttribute("class", "fold-note");
        note.setAttribute("text-anchor", "middle");
        note.setAttribute("x", String(area.x + area.width / 2));
        note.setAttribute("y", String(area.y + area.height / 2));
        note.textContent = "folded: click to unfold";
        box.appendChild(note);
      }
      return box;
    }

    function setFolded(cluster, fold) {
      var at = folded.indexOf(cluster);
      if (fold && at < 0) {
        folded.push(cluster);
        cover(cluster);
      }
      if (!fold && at >= 0) {
        folded.splice(at, 1);
        var box = svg.querySelector("[data-cover='" + cluster.id + "']");
        if (box) box.parentNode.removeChild(box);
      }
      refold();
      showFold();
    }

    // Unfold every folded group that hides an element.
    function reveal(element) {
      if (!element.classList.contains("folded-away")) return;
      var area = bounds(element);
      folded.slice().forEach(function (cluster) {
        if (inside(area, outline(cluster))) setFolded(cluster, false);
      });
    }

    function label(cluster) {
      var texts = cluster.querySelectorAll("text");
      return Array.prototype.map.call(texts, function (t) { return t.textContent; }).join(" ");
    }

    // -- open one group (a decoder block ×61) on its own: zoomed to fill the view ----------------------------------

    var groupSelect = root.querySelector("#explorer-group");
    var foldButton = root.querySelector("[data-explorer=fold]");

    // The fold button is pressed while the chosen group is folded.
    function showFold() {
      var cluster = document.getElementById(groupSelect.value);
      var fold = !!cluster && folded.indexOf(cluster) >= 0;
      foldButton.setAttribute("aria-pressed", String(fold));
    }

    function openGroup(cluster) {
      if (folded.indexOf(cluster) >= 0) setFolded(cluster, false);
      reveal(cluster);
      show(outline(cluster));
      groupSelect.value = cluster.id;
      showFold();
    }

    clusters.forEach(function (cluster) {
      var option = document.createElement("option");
      option.value = cluster.id;
      option.textContent = label(cluster);
      groupSelect.appendChild(option);
    });
    var repeated = clusters.filter(function (cluster) { return /\u00d7/.test(label(cluster)); })[0];
    if (repeated) groupSelect.value = repeated.id;
    groupSelect.addEventListener("change", showFold);
    showFold();

    // -- find in the diagram: boxes and labelled edges by id, title, code, label, tensor, config key or checkpoint
    // tensor name (the brief card's data-find) ----------------------------------------------------------------------

    var findInput = root.querySelector("#explorer-find");
    var findCount = root.querySelector("#explorer-count");
    var searchable = Array.prototype.slice.call(svg.querySelectorAll("[id^='" + NODE + "']")).map(function (element) {
      var id = element.id.slice(NODE.length);
      var card = cards[id] ? cards[id].content : null;
      var title = card ? card.querySelector(".explorer-title").textContent : "";
      var code = card && card.querySelector(".expression") ? card.querySelector(".expression").textContent : "";
      var names = cards[id] ? cards[id].getAttribute("data-find") || "" : "";
      return { element: element, text: [id, title, code, names, element.textContent].join(" ").toLowerCase() };
    });

    function find(query) {
      query = query.trim().toLowerCase();
      matches.forEach(function (element) { element.classList.remove("match", "match-current"); });
      matches = [];
      current = -1;
      if (query) {
        matches = searchable.filter(function (item) { return item.text.indexOf(query) >= 0; })
          .map(function (item) { return item.element; });
      }
      matches.forEach(function (element) { element.classList.add("match"); });
      findCount.textContent = !query ? "" : matches.length ? matches.length + " found" : "none found";
    }

    function step(by) {
      if (!matches.length) return;
      if (current >= 0) matches[current].classList.remove("match-current");
      current = (current + by + matches.length) % matches.length;
      matches[current].classList.add("match-current");
      findCount.textContent = current + 1 + " of " + matches.length;
      centreOn(matches[current]);
    }

    findInput.addEventListener("input", function () { find(findInput.value); });
    findInput.addEventListener("keydown", function (event) {
      if (event.key === "Enter") {
        event.preventDefault();
        step(event.shiftKey ? -1 : 1);
      } else if (event.key === "Escape") {
        findInput.value = "";
        find("");
      }
    });

    // -- colour by parameters or prefill FLOPs: a sequential scale on a log axis, with its legend --------------------

    var scale = root.querySelector("#explorer-scale");
    var SCALE_TITLES = { parameters: "Parameters, every instance", flops: "Prefill FLOPs, every instance" };

    function colourBy(measure) {
      var boxes = svg.querySelectorAll("g.node[id^='" + NODE + "']");
      var own = {};
      var values = [];
      for (var i = 0; i < boxes.length; i++) {
        boxes[i].classList.remove.apply(boxes[i].classList, HEAT_CLASSES);
        var card = cards[boxes[i].id.slice(NODE.length)];
        own[boxes[i].id] = measure && card ? Number(card.getAttribute("data-" + measure)) : 0;
        if (own[boxes[i].id] > 0) values.push(own[boxes[i].id]);
      }
      var list = scale.querySelector("ol");
      while (list.firstChild) list.removeChild(list.firstChild);
      scale.hidden = !measure || !values.length;
      if (scale.hidden) return;
      var low = Math.log(Math.min.apply(null, values));
      var high = Math.log(Math.max.apply(null, values));
      var width = (high - low) / BINS || 1;
      for (var j = 0; j < boxes.length; j++) {
        var value = own[boxes[j].id];
        var bin = value > 0 ? Math.min(BINS - 1, Math.floor((Math.log(value) - low) / width)) : "none";
        boxes[j].classList.add("heat", "heat-" + bin);
      }
      scale.querySelector(".explorer-scale-title").textContent = SCALE_TITLES[measure];
      for (var b = 0; b < BINS; b++) {
        var item = document.createElement("li");
        var swatch = document.createElement("span");
        swatch.className = "swatch heat-" + b;
        item.appendChild(swatch);
        item.appendChild(document.createTextNode("\u2265 " + shortNumber(Math.exp(low + b * width))));
        list.appendChild(item);
      }
    }

    var colour = root.querySelector("#explorer-colour");
    colour.addEventListener("change", function () { colourBy(colour.value); });

    // -- the toolbar's buttons ----------------------------------------------------------------------------------

    var ACTIONS = {
      "zoom-in": function () { zoomAt(STEP); },
      "zoom-out": function () { zoomAt(1 / STEP); },
      fit: fit,
      next: function () { step(1); },
      previous: function () { step(-1); },
      "open-group": function () {
        var cluster = document.getElementById(groupSelect.value);
        if (cluster) openGroup(cluster);
      },
      fold: function () {
        var cluster = document.getElementById(groupSelect.value);
        if (cluster) setFolded(cluster, folded.indexOf(cluster) < 0);
      },
      close: function () { closePanel(); box.focus({ preventScroll: true }); }
    };
    panel.addEventListener("keydown", function (event) {
      if (event.key === "Escape") ACTIONS.close();
    });
    root.addEventListener("click", function (event) {
      var button = event.target.closest("[data-explorer]");
      if (button && ACTIONS[button.getAttribute("data-explorer")]) ACTIONS[button.getAttribute("data-explorer")]();
    });

    buildMinimap();
    open();
    if (colour.value) colourBy(colour.value); // a value the browser kept from the last visit
    if (follow(window.location.hash) && /^#node=/.test(window.location.hash)) root.scrollIntoView();
    window.addEventListener("hashchange", function () { follow(window.location.hash); });
    var width = window.innerWidth;
    window.addEventListener("resize", function () {
      sizeMinimap();
      if (window.innerWidth !== width) open(); // a turned phone; not a toolbar hiding
      else apply();
      width = window.innerWidth;
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var root = document.getElementById("explorer");
    if (root) start(root);
  });
})();
