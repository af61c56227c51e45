// memors web view: progressive enhancement only. Without this file every
// link and form works; with it, hovering or focusing a citation shows the
// passage it cites, its document and its status.
(function () {
  "use strict";
  var pop = null;
  var cache = {};
  function hide() { if (pop) { pop.remove(); pop = null; } }
  function show(link, html) {
    hide();
    pop = document.createElement("div");
    pop.className = "preview-pop";
    pop.setAttribute("role", "tooltip");
    // The fragment comes from this server, rendered with every value escaped.
    pop.innerHTML = html;
    document.body.appendChild(pop);
    place(pop, link.getBoundingClientRect());
  }
  // Near the link, but inside the viewport: pulled left from the right
  // edge, and above the link when there is no room below it.
  function place(box, r) {
    var margin = 8;
    var view = document.documentElement;
    var width = Math.min(box.offsetWidth, view.clientWidth - 2 * margin);
    box.style.maxWidth = width + "px";
    var left = Math.min(r.left - 20, view.clientWidth - margin - width);
    var top = r.bottom + 6;
    if (top + box.offsetHeight > view.clientHeight - margin && r.top - 6 - box.offsetHeight >= margin) {
      top = r.top - 6 - box.offsetHeight;
    }
    box.style.left = (window.scrollX + Math.max(margin, left)) + "px";
    box.style.top = (window.scrollY + top) + "px";
  }
  function preview(event) {
    var link = event.target.closest("a.cite");
    if (!link) { return; }
    var source = link.getAttribute("data-source") || "";
    var m = /^memo:\/\/passage\/(.+)$/.exec(source);
    if (!m) { return; }
    link.removeAttribute("title");
    var ns = document.body.getAttribute("data-ns");
    var path = "/ns/" + encodeURIComponent(ns) + "/preview/" + encodeURIComponent(m[1]);
    if (cache[path]) { show(link, cache[path]); return; }
    fetch(path, { credentials: "same-origin" }).then(function (r) {
      return r.ok ? r.text() : null;
    }).then(function (html) {
      if (html) { cache[path] = html; show(link, html); }
    });
  }
  document.addEventListener("mouseover", preview);
  document.addEventListener("focusin", preview);
  document.addEventListener("mouseout", function (e) { if (e.target.closest("a.cite")) { hide(); } });
  document.addEventListener("focusout", hide);
  document.addEventListener("keydown", function (e) { if (e.key === "Escape") { hide(); } });
})();
