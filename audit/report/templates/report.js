
(function () {
  var errors = [];
  window.__reportErrors = errors;
  window.addEventListener('error', function (e) {
    var t = e.target;
    errors.push(t && t !== window && t.tagName ? ('failed to load ' + t.tagName) : String(e.message));
  }, true);
  var origError = console.error;
  console.error = function () { errors.push(Array.prototype.join.call(arguments, ' ')); origError.apply(console, arguments); };
  var PAGE = 100, page = 0;
  function applyFilters(keepPage) {
    var sev = document.getElementById('sev-filter');
    var q = document.getElementById('text-filter');
    if (!sev || !q) { return; }
    if (!keepPage) { page = 0; }
    var want = sev.value, text = q.value.toLowerCase(), matching = [];
    var rows = document.querySelectorAll('#findings-table tbody.finding');
    for (var i = 0; i < rows.length; i++) {
      var r = rows[i];
      if ((!want || r.getAttribute('data-severity') === want) &&
          (!text || r.textContent.toLowerCase().indexOf(text) >= 0)) { matching.push(r); }
      r.style.display = 'none';
    }
    var pages = Math.max(1, Math.ceil(matching.length / PAGE));
    page = Math.min(page, pages - 1);
    for (var j = page * PAGE; j < Math.min(matching.length, (page + 1) * PAGE); j++) { matching[j].style.display = ''; }
    var c = document.getElementById('shown-count');
    if (c) { c.textContent = String(matching.length); }
    var info = document.getElementById('page-info');
    if (info) { info.textContent = 'page ' + (page + 1) + ' of ' + pages; }
    var prev = document.getElementById('page-prev'), next = document.getElementById('page-next');
    if (prev) { prev.disabled = page === 0; }
    if (next) { next.disabled = page >= pages - 1; }
  }
  window.addEventListener('DOMContentLoaded', function () {
    var sev = document.getElementById('sev-filter');
    var q = document.getElementById('text-filter');
    if (sev) { sev.addEventListener('change', function () { applyFilters(false); }); }
    if (q) { q.addEventListener('input', function () { applyFilters(false); }); }
    var prev = document.getElementById('page-prev'), next = document.getElementById('page-next');
    if (prev) { prev.addEventListener('click', function () { page = Math.max(0, page - 1); applyFilters(true); }); }
    if (next) { next.addEventListener('click', function () { page++; applyFilters(true); }); }
    applyFilters(true);
  });
  window.addEventListener('load', function () {
    var imgs = document.querySelectorAll('img.plot');
    var okCount = 0, bad = 0;
    for (var i = 0; i < imgs.length; i++) {
      if (imgs[i].complete && imgs[i].naturalWidth > 0) { okCount++; } else { bad++; }
    }
    var b = document.body;
    b.setAttribute('data-plots-rendered', String(okCount));
    b.setAttribute('data-plots-broken', String(bad));
    b.setAttribute('data-table-rows', String(document.querySelectorAll('#findings-table tbody.finding').length));
    b.setAttribute('data-errors', String(errors.length));
    b.setAttribute('data-error-text', errors.join(' | '));
    b.setAttribute('data-report-ready', '1');
  });
})();
