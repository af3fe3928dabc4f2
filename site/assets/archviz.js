/* archviz: the search box and the prefill/decode toggle. No dependencies; works from file://. */
(function () {
  "use strict";
  var html = document.documentElement;
  var STORE = "archviz-phase";
  html.classList.add("js");

  function storedPhase() {
    try {
      return window.localStorage.getItem(STORE) === "decode" ? "decode" : "prefill";
    } catch (error) {
      return "prefill";
    }
  }

  function setPhase(phase, remember) {
    html.setAttribute("data-phase", phase);
    var buttons = document.querySelectorAll("[data-set-phase]");
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].setAttribute("aria-pressed", String(buttons[i].getAttribute("data-set-phase") === phase));
    }
    if (remember) {
      try {
        window.localStorage.setItem(STORE, phase);
      } catch (error) {
        /* storage unavailable: the choice lasts for this page only */
      }
    }
  }

  setPhase(storedPhase(), false);

  // A query as the index spells things: lower case, digits without separators (163,840 and 163_840 are 163840).
  function normalise(query) {
    return query.toLowerCase().replace(/(\d)[,_\u2009\u202f](?=\d{3}(?!\d))/g, "$1").trim();
  }

  // A checkpoint tensor name with layer or expert numbers (model.layers.3.mlp.experts.17.down_proj.weight) matches
  // the index's templates (model.layers.{layer}.mlp.experts.{expert}.down_proj.weight) as well as itself.
  function tensorPattern(word) {
    var parts = word.split(".").map(function (part) {
      return /^\d+$/.test(part) ? "(?:" + part + "|\\{[a-z_]+\\})" : part.replace(/[\\^$*+?.()|[\]{}]/g, "\\$&");
    });
    return new RegExp("(?:^|[\\s.])" + parts.join("\\.") + "(?=\\s|$)");
  }

  // Whether a word of the query occurs: a number only as a whole number (7168 is not found in 71680), a tensor name
  // with numbers through its template, anything else anywhere.
  function contains(all, word) {
    if (/^\d+$/.test(word)) return (" " + all + " ").indexOf(" " + word + " ") >= 0;
    if (/\.\d+(\.|$)/.test(word)) return all.indexOf(word) >= 0 || tensorPattern(word).test(all);
    return all.indexOf(word) >= 0;
  }

  // Rank of an entry for a query (lower is better), or -1: every word of the query must occur in the entry's
  // title, summary, kind or search text (id, code, config keys, numbers, dtypes, tensor names, family, model).
  function score(entry, query) {
    var title = entry.t.toLowerCase();
    var all = title + " " + entry.s.toLowerCase() + " " + entry.k.toLowerCase() + " " + (entry.x || "");
    var words = query.split(/\s+/);
    for (var i = 0; i < words.length; i++) {
      if (words[i] && !contains(all, words[i])) return -1;
    }
    if (title.indexOf(query) === 0) return 0;
    if ((" " + title).indexOf(" " + query) >= 0) return 1;
    if (title.indexOf(query) >= 0) return 2;
    return 3;
  }

  // Matches grouped by model (in the site's order), best first within a model.
  function search(query, limit) {
    query = normalise(query);
    var index = window.ARCHVIZ_SEARCH_INDEX || [];
    var models = {};
    var hits = [];
    for (var i = 0; i < index.length; i++) {
      var group = index[i].g || index[i].m;
      if (!(group in models)) models[group] = i;
      var rank = score(index[i], query);
      if (rank >= 0) hits.push({ rank: rank, order: i, model: models[group], entry: index[i] });
    }
    hits.sort(function (a, b) { return a.model - b.model || a.rank - b.rank || a.order - b.order; });
    return hits.slice(0, limit).map(function (hit) { return hit.entry; });
  }
  window.archvizSearch = search;

  // The search index holds every model's entries and grows with the site, so a page loads it only when the search
  // box is first used (a script element: it works from file://, where fetch does not). ``archvizSearchReady()``
  // resolves once it is there.
  var indexLoading = null;
  function loadIndex() {
    if (!indexLoading) {
      indexLoading = new Promise(function (resolve, reject) {
        if (window.ARCHVIZ_SEARCH_INDEX) return resolve();
        var form = document.getElementById("search-form");
        var source = form && form.getAttribute("data-index");
        if (!source) return reject(new Error("this page names no search index"));
        var script = document.createElement("script");
        script.src = source;
        script.onload = function () { resolve(); };
        script.onerror = function () { indexLoading = null; reject(new Error("the search index did not load")); };
        document.head.appendChild(script);
      });
    }
    return indexLoading;
  }
  window.archvizSearchReady = loadIndex;

  function showResults(list, query) {
    var root = document.body.getAttribute("data-root") || "";
    while (list.firstChild) list.removeChild(list.firstChild);
    if (!query) return;
    var hits = search(query, 200);
    if (!hits.length) {
      var none = document.createElement("li");
      none.className = "empty";
      none.textContent = "No match for \u201c" + query + "\u201d";
      list.appendChild(none);
      return;
    }
    var current = null;
    for (var i = 0; i < hits.length; i++) {
      var entry = hits[i];
      var model = entry.g || entry.m;
      if (model !== current) {
        current = model;
        var heading = document.createElement("li");
        heading.className = "result-model";
        heading.textContent = model;
        list.appendChild(heading);
      }
      var item = document.createElement("li");
      var link = document.createElement("a");
      link.href = root + entry.u;
      link.textContent = entry.t;
      var meta = document.createElement("span");
      meta.className = "note";
      meta.textContent = entry.k + " \u00b7 " + entry.m;
      item.appendChild(link);
      item.appendChild(document.createTextNode(" "));
      item.appendChild(meta);
      list.appendChild(item);
    }
  }

  // A diagram wider than its box opens on its spine (the first box), not on its left margin; a box the page
  // links to (the card's "back to the overview") is brought into view instead.
  function centreDiagrams() {
    var boxes = document.querySelectorAll(".dfg-scroll");
    for (var i = 0; i < boxes.length; i++) {
      var box = boxes[i];
      if (box.scrollWidth <= box.clientWidth) continue;
      var target = null;
      if (window.location.hash) {
        try { target = box.querySelector(window.location.hash.replace(/\./g, "\\.")); } catch (error) { target = null; }
      }
      target = target || box.querySelector("g.current") || box.querySelector("g.node");
      if (!target) continue;
      var rect = target.getBoundingClientRect();
      var frame = box.getBoundingClientRect();
      box.scrollLeft += rect.left + rect.width / 2 - (frame.left + box.clientWidth / 2);
    }
  }

  // A gallery's card holds no copy of its sublayer's diagram: the diagram's script (archviz's own SVG, as a string)
  // adds it to ARCHVIZ_DIAGRAMS, and here it is put in its box and this card's node outlined.
  function placeSharedDiagrams() {
    var boxes = document.querySelectorAll("[data-shared-diagram]");
    var shared = window.ARCHVIZ_DIAGRAMS || {};
    for (var i = 0; i < boxes.length; i++) {
      var svg = shared[boxes[i].getAttribute("data-shared-diagram")];
      if (typeof svg !== "string") continue;
      boxes[i].innerHTML = svg;
      var current = boxes[i].querySelector('[id="' + boxes[i].getAttribute("data-current") + '"]');
      if (current) current.setAttribute("class", "current " + (current.getAttribute("class") || ""));
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    placeSharedDiagrams();
    setPhase(html.getAttribute("data-phase") || "prefill", false);
    centreDiagrams();
    var buttons = document.querySelectorAll("[data-set-phase]");
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].addEventListener("click", function (event) {
        setPhase(event.currentTarget.getAttribute("data-set-phase"), true);
      });
    }
    var form = document.getElementById("search-form");
    var input = document.getElementById("search-input");
    var list = document.getElementById("search-results");
    if (!form || !input || !list) return;
    input.addEventListener("focus", function () {
      loadIndex().catch(function () { /* said when the reader types */ });
    });
    input.addEventListener("input", function () {
      loadIndex().then(function () {
        showResults(list, input.value.trim().toLowerCase());
      }, function (error) {
        while (list.firstChild) list.removeChild(list.firstChild);
        var item = document.createElement("li");
        item.className = "empty";
        item.textContent = "Search is unavailable: " + error.message;
        list.appendChild(item);
      });
    });
    input.addEventListener("keydown", function (event) {
      if (event.key === "Escape") {
        input.value = "";
        showResults(list, "");
      } else if (event.key === "ArrowDown") {
        var first = list.querySelector("a");
        if (first) {
          event.preventDefault();
          first.focus();
        }
      }
    });
    // The arrow keys move through the results, as in a list of suggestions; up from the first returns to the box,
    // Escape returns to it too.
    list.addEventListener("keydown", function (event) {
      var links = Array.prototype.slice.call(list.querySelectorAll("a"));
      var at = links.indexOf(document.activeElement);
      if (at < 0) return;
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        var next = at + (event.key === "ArrowDown" ? 1 : -1);
        if (next < 0) input.focus();
        else links[Math.min(next, links.length - 1)].focus();
      } else if (event.key === "Escape") {
        event.preventDefault();
        input.focus();
      }
    });
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var first = list.querySelector("a");
      if (first) window.location.href = first.href;
    });
  });
})();
