// Maat challenge page: solves the proof of work and submits the nonces;
// falls back to the wait, when the page offers one, on a slow or limited
// device. The page inlines this script in its <head>, ahead of the style
// sheet, so that the work starts while the page is still loading; the
// progress display joins in at DOMContentLoaded.
//
// The search runs as WebAssembly (search.wasm, compiled once) on the page's
// own thread in slices of a few milliseconds, which at the usual
// difficulties finishes before a worker would have started; a large
// difficulty, a browser without WebAssembly, or a search not finished in
// spawnMS also brings one Web Worker per core (worker.js, which takes the
// compiled module or searches in JavaScript).
(function () {
  'use strict';
  // Marks for the time-to-content benchmark (User Timing; no cost to speak of).
  function mark(name) { if (window.performance && performance.mark) performance.mark('maat:' + name); }
  mark('start');
  var me = document.currentScript;
  if (!me) return;
  var d = me.dataset;
  if (d.mode === 'wait') {
    setTimeout(function () { location.replace(d.wait); }, +d.waitMs);
    return;
  }
  var k = +d.k, bits = +d.bits, perPuzzle = Math.pow(2, bits), expected = k * perPuzzle;
  var cores = Math.max(1, Math.min(navigator.hardwareConcurrency || 2, 16));
  // Lanes 0…cores-1 are the workers, lane cores (own) the page's thread; the
  // lane is part of each nonce, so no two lanes try the same one.
  var lanes = cores + 1, own = cores;
  var workers = [], nonces = [], done = 0, hashes = 0, over = false, ready = false;
  // Per puzzle: solved, the workers on it, hashes spent; per puzzle and
  // lane: the next nonce counter. Per lane: the chunk size, adapted so that
  // a chunk takes about chunkMS on a worker and ownMS on the page's
  // thread (small while a worker's JavaScript is cold, so that no worker
  // lingers on a puzzle another lane has solved). The page's thread works
  // firstMS at first, so that an easy proof is done before the page
  // renders, then ownMS at a time.
  var solved = [], busy = [], spent = [], counters = [], chunk = [], sent = [];
  var chunkMS = 25, ownMS = 16, firstMS = 50, minChunk = 256, ownChunk = 1 << 14, maxChunk = 1 << 22, spawnMS = 250;
  var module = null, wasm = null, spawned = false, spawnTimer = 0;
  var t0 = Date.now(), ui = null;
  for (var p = 0; p < k; p++) {
    solved.push(false); busy.push(0); spent.push(0);
    for (var j = 0; j < lanes; j++) counters.push(0);
  }
  for (j = 0; j < lanes; j++) { chunk.push(minChunk); sent.push(0); }
  chunk[own] = ownChunk; // WebAssembly needs no warm-up

  function stop() {
    over = true;
    clearTimeout(spawnTimer);
    for (var i = 0; i < workers.length; i++) workers[i].terminate();
  }
  // At the cap a slow device takes the wait when the page offers one;
  // without it, the visitor is told to keep the page open, and the work
  // goes on.
  var slow = false;
  function fallback() {
    if (over) return;
    slow = true;
    if (ui) ui.say(ui.d.tSlow);
    if (!d.wait) return;
    stop();
    location.replace(d.wait);
  }
  var timer = setTimeout(fallback, +d.cap);
  // With no way to search, take the wait once it is over, or say that the
  // check cannot run here.
  var broken = false;
  function failSoon() {
    if (over || wasm) return;
    clearTimeout(timer);
    if (d.wait) { timer = setTimeout(fallback, +d.waitMs); return; }
    stop();
    broken = true;
    if (ui) ui.say(ui.d.tNojs);
  }

  function hex8(n) { return ('0000000' + (n >>> 0).toString(16)).slice(-8); }

  function finish() {
    mark('solved');
    stop();
    clearTimeout(timer);
    if (ui) ui.done();
    location.replace(d.pass + '&n=' + nonces.join(','));
  }

  // pick chooses a puzzle for a free lane: the first nobody works on, else
  // the one with the fewest workers.
  function pick() {
    var best = -1;
    for (var p = 0; p < k; p++) {
      if (solved[p]) continue;
      if (!busy[p]) return p;
      if (best < 0 || busy[p] < busy[best]) best = p;
    }
    return best;
  }

  // result takes lane j's answer for puzzle p: the nonce n or -1, after
  // count tries that took the given milliseconds.
  function result(j, p, n, count, took, target) {
    hashes += count;
    spent[p] += count;
    var f = Math.max(0.25, Math.min(4, target / Math.max(1, took)));
    chunk[j] = Math.max(minChunk, Math.min(maxChunk, Math.round(chunk[j] * f)));
    if (n >= 0 && !solved[p]) {
      solved[p] = true;
      nonces[p] = hex8((p << 24) | j) + hex8(n);
      if (++done === k) { finish(); return; }
    }
    if (ui) ui.update(false);
  }

  // The page's own thread searches for ownMS (puzzle after puzzle: an easy
  // one takes a fraction of a slice), then yields to the page (a message,
  // not a timer: timers are clamped).
  var tick = new MessageChannel(), budget = firstMS;
  function step() {
    var until = Date.now() + budget;
    budget = ownMS;
    do {
      var p = pick();
      if (over || p < 0) return;
      var c = p * lanes + own, start = counters[c], count = chunk[own];
      counters[c] += count;
      var t = Date.now();
      var i = wasm.search((p << 24) | own, start, count, bits);
      result(own, p, i < 0 ? -1 : start + i, i < 0 ? count : i + 1, Date.now() - t, ownMS);
    } while (!over && Date.now() < until);
    if (!over) tick.port2.postMessage(0);
  }
  tick.port1.onmessage = step;

  function dispatch(j) {
    var p = pick();
    if (over || p < 0) return;
    busy[p]++;
    var c = p * lanes + j, start = counters[c];
    counters[c] += chunk[j];
    sent[j] = Date.now();
    workers[j].postMessage({ puzzle: p, w0: (p << 24) | j, start: start, count: chunk[j], bits: bits });
  }

  function onMessage(j, m) {
    if (over) return;
    if (m.seeded) {
      if (!ready) { ready = true; mark('ready'); }
      return;
    }
    if (m.wasm !== undefined) return; // the worker took the module
    busy[m.puzzle]--;
    result(j, m.puzzle, m.n, m.count, Date.now() - sent[j], chunkMS);
    dispatch(j);
  }

  function spawn() {
    if (spawned || over) return;
    spawned = true;
    try {
      for (var j = 0; j < cores; j++) {
        var w = new Worker(d.worker);
        w.onmessage = (function (j) { return function (ev) { onMessage(j, ev.data); }; })(j);
        w.onerror = failSoon;
        w.postMessage({ seed: d.seed });
        if (module) w.postMessage({ module: module });
        workers.push(w);
      }
      mark('workers');
      for (j = 0; j < workers.length; j++) dispatch(j);
    } catch (e) {
      failSoon();
    }
  }

  // seedWords reads the 64-character seed as 16 big-endian words.
  function seedWords() {
    var w = [];
    for (var i = 0; i < 16; i++) {
      w.push((d.seed.charCodeAt(4 * i) << 24) | (d.seed.charCodeAt(4 * i + 1) << 16) |
        (d.seed.charCodeAt(4 * i + 2) << 8) | d.seed.charCodeAt(4 * i + 3));
    }
    return w;
  }

  // load compiles search.wasm; without WebAssembly (or when it is refused)
  // the workers search in JavaScript.
  function load() {
    if (typeof WebAssembly !== 'object' || !d.wasm || !window.fetch) return false;
    var compiled = WebAssembly.compileStreaming ? WebAssembly.compileStreaming(fetch(d.wasm)) :
      fetch(d.wasm).then(function (r) { return r.arrayBuffer(); }).then(function (b) { return WebAssembly.compile(b); });
    compiled.then(function (m) {
      if (over) return;
      module = m;
      for (var j = 0; j < workers.length; j++) workers[j].postMessage({ module: m });
      wasm = new WebAssembly.Instance(m, {}).exports;
      wasm.seed.apply(null, seedWords());
      if (!ready) { ready = true; mark('ready'); }
      step();
    }).catch(function () { spawn(); });
    return true;
  }

  // Without cookies the pass cannot stick and the visitor would loop: say
  // so instead of working (the browser's own flag, not a guess).
  var noCookies = navigator.cookieEnabled === false;
  if (noCookies) {
    over = true;
    clearTimeout(timer);
  } else if (!load() || expected > (1 << 18)) {
    spawn();
  } else {
    spawnTimer = setTimeout(spawn, spawnMS);
  }

  // The progress display, once the page is there.
  function start() {
    var root = document.getElementById('maat');
    if (!root) return;
    var t = root.dataset;
    var bar = document.getElementById('maat-bar');
    var status = document.getElementById('maat-status');
    var speed = document.getElementById('maat-speed');
    var num, units, lastUI = t0, announced = 0;
    // format numbers and durations in the page's language (the browser's
    // CLDR data supplies the plural forms), made on first use: most
    // visitors are through before the first progress report.
    function formats() {
      try { num = new Intl.NumberFormat(t.lang, { maximumFractionDigits: 0 }); } catch (e) { num = { format: String }; }
      units = {};
      ['second', 'minute', 'hour'].forEach(function (u) {
        try {
          units[u] = new Intl.NumberFormat(t.lang, { style: 'unit', unit: u, unitDisplay: 'long', maximumFractionDigits: 0 });
        } catch (e) { units[u] = { format: function (n) { return num.format(n) + ' ' + u[0]; } }; }
      });
    }
    function duration(s) {
      if (s < 90) return units.second.format(s);
      if (s < 90 * 60) return units.minute.format(Math.round(s / 60));
      return units.hour.format(Math.round(s / 3600));
    }
    root.hidden = false;
    ui = {
      d: t,
      say: function (text) { status.textContent = text; },
      // Done: the time left is over, so it goes with the speed.
      done: function () {
        bar.value = 100;
        bar.textContent = '100%';
        status.textContent = t.tDone;
        speed.textContent = '';
      },
      update: function (force) {
        var now = Date.now();
        if (!force && now - lastUI < 250) return;
        lastUI = now;
        if (!num) formats();
        var part = done;
        for (var p = 0; p < k; p++) if (!solved[p]) part += Math.min(0.95, spent[p] / perPuzzle);
        var pct = Math.floor(100 * part / k);
        bar.value = pct;
        bar.textContent = pct + '%';
        var rate = hashes / Math.max(0.001, (now - t0) / 1000);
        var left = Math.max(1, Math.ceil(Math.max(0, expected - hashes) / Math.max(rate, 1)));
        speed.textContent = t.tSpeed.replace('%s', num.format(rate)) + ' · ' + t.tEta.replace('%s', duration(left));
        // Announce a few milestones only, so a screen reader is not flooded.
        var milestone = Math.floor(pct / 25) * 25;
        if (milestone > announced) {
          announced = milestone;
          status.textContent = status.textContent.replace(/\s*\d+\s*%$/, '') + ' ' + milestone + '%';
        }
      }
    };
    if (noCookies) ui.say(t.tCookies);
    else if (broken) ui.say(t.tNojs);
    else if (slow) ui.say(t.tSlow);
    else if (over) ui.done();
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
