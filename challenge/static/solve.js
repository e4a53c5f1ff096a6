// Maat challenge page: runs the proof of work in one Web Worker per core and
// submits the nonces; falls back to the wait path on a slow or limited device.
(function () {
  'use strict';
  // Marks for the time-to-content benchmark (User Timing; no cost to speak of).
  function mark(name) { if (window.performance && performance.mark) performance.mark('maat:' + name); }
  mark('start');
  var root = document.getElementById('maat');
  if (!root) return;
  var d = root.dataset;
  if (d.mode === 'wait') {
    setTimeout(function () { location.replace(d.wait); }, +d.waitMs);
    return;
  }
  var bar = document.getElementById('maat-bar');
  var status = document.getElementById('maat-status');
  var speed = document.getElementById('maat-speed');
  var k = +d.k, bits = +d.bits, chunk = 1 << 16;
  var perPuzzle = Math.pow(2, bits), expected = k * perPuzzle;
  var cores = Math.max(1, Math.min(navigator.hardwareConcurrency || 2, 16));
  var num, units = {};
  try { num = new Intl.NumberFormat(d.lang, { maximumFractionDigits: 0 }); } catch (e) { num = { format: String }; }
  ['second', 'minute', 'hour'].forEach(function (u) {
    try {
      units[u] = new Intl.NumberFormat(d.lang, { style: 'unit', unit: u, unitDisplay: 'long', maximumFractionDigits: 0 });
    } catch (e) { units[u] = { format: function (n) { return num.format(n) + ' ' + u[0]; } }; }
  });
  // duration formats seconds in the largest sensible unit, in the page's
  // language (the browser's CLDR data supplies the plural forms).
  function duration(s) {
    if (s < 90) return units.second.format(s);
    if (s < 90 * 60) return units.minute.format(Math.round(s / 60));
    return units.hour.format(Math.round(s / 3600));
  }
  // Without cookies the pass cannot stick and the visitor would loop: say
  // so instead of working (the browser's own flag, not a guess).
  if (navigator.cookieEnabled === false) {
    root.hidden = false;
    document.getElementById('maat-status').textContent = d.tCookies;
    return;
  }
  var workers = [], counters = [], nonces = [], puzzle = 0, hashes = 0, inPuzzle = 0;
  var t0 = Date.now(), lastUI = 0, announced = 0, over = false;
  root.hidden = false;

  function stop() {
    over = true;
    for (var i = 0; i < workers.length; i++) workers[i].terminate();
  }
  // At the cap a slow device takes the wait when the page offers one;
  // without it, the visitor is told to keep the page open, and the work
  // goes on.
  function fallback() {
    if (over) return;
    status.textContent = d.tSlow;
    if (!d.wait) return;
    stop();
    location.replace(d.wait);
  }
  var timer = setTimeout(fallback, +d.cap);
  // Without workers, take the wait path once the wait is over, or say
  // that the check cannot run here.
  function failSoon() {
    if (over) return;
    clearTimeout(timer);
    if (d.wait) { timer = setTimeout(fallback, +d.waitMs); return; }
    stop();
    status.textContent = d.tNojs;
  }

  function hex8(n) { return ('0000000' + (n >>> 0).toString(16)).slice(-8); }

  function ui(force) {
    var now = Date.now();
    if (!force && now - lastUI < 250) return;
    lastUI = now;
    var pct = Math.floor(100 * (puzzle + Math.min(0.95, inPuzzle / perPuzzle)) / k);
    bar.value = pct;
    bar.textContent = pct + '%';
    var rate = hashes / Math.max(0.001, (now - t0) / 1000);
    var left = Math.max(1, Math.ceil(Math.max(0, expected - hashes) / Math.max(rate, 1)));
    speed.textContent = d.tSpeed.replace('%s', num.format(rate)) + ' · ' + d.tEta.replace('%s', duration(left));
    // Announce a few milestones only, so a screen reader is not flooded.
    var milestone = Math.floor(pct / 25) * 25;
    if (milestone > announced) {
      announced = milestone;
      status.textContent = status.textContent.replace(/\s*\d+\s*%$/, '') + ' ' + milestone + '%';
    }
  }

  function finish() {
    mark('solved');
    stop();
    clearTimeout(timer);
    bar.value = 100;
    bar.textContent = '100%';
    status.textContent = d.tDone;
    location.replace(d.pass + '&n=' + nonces.join(','));
  }

  function dispatch(j) {
    if (over) return;
    var start = counters[j];
    counters[j] += chunk;
    workers[j].postMessage({ puzzle: puzzle, w0: (puzzle << 24) | j, start: start, count: chunk, bits: bits });
  }

  function onResult(j, m) {
    if (over) return;
    if (!hashes) mark('first');
    hashes += m.count;
    if (m.puzzle === puzzle) {
      inPuzzle += m.count;
      if (m.n >= 0) {
        nonces.push(hex8((puzzle << 24) | j) + hex8(m.n));
        puzzle++;
        inPuzzle = 0;
        for (var i = 0; i < counters.length; i++) counters[i] = 0;
        if (puzzle === k) { finish(); return; }
      }
    }
    ui(false);
    dispatch(j);
  }

  try {
    for (var j = 0; j < cores; j++) {
      var w = new Worker(d.worker);
      w.onmessage = (function (j) { return function (ev) { onResult(j, ev.data); }; })(j);
      w.onerror = failSoon;
      w.postMessage({ seed: d.seed });
      workers.push(w);
      counters.push(0);
    }
  } catch (e) {
    failSoon();
    return;
  }
  for (var i = 0; i < workers.length; i++) dispatch(i);
})();
