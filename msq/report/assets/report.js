/* msq report: decodes the inline payload and draws the header, charts, findings and table.
 * Text from the dumps (op names, arguments, messages) only ever goes into textContent, titles
 * or canvas text: never into innerHTML. See msq/report/payload.py for the payload layout. */
'use strict';
(function () {
  const RED = '#d7263d', YELLOW = '#e0a800', FAILING = '#e8590c', PLAIN = '#3a6ea5', NOFIG = '#a9b1ba', INHERITED = '#9b59b6';
  const MARK_COLORS = { red: RED, yellow: YELLOW };

  // ------------------------------------------------------------------------------ helpers
  const byId = (id) => document.getElementById(id);

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    if (props) {
      for (const [key, value] of Object.entries(props)) {
        if (value === undefined || value === null || value === false) continue;
        if (key === 'class') node.className = value;
        else if (key === 'text') node.textContent = value;
        else if (key === 'style') node.style.cssText = value;
        else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
        else if (key === 'data') for (const [k, v] of Object.entries(value)) node.dataset[k] = v;
        else node.setAttribute(key, value);
      }
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  function fmtNum(v) {
    if (v === null || v === undefined) return '';
    if (Number.isNaN(v)) return 'nan';
    if (!Number.isFinite(v)) return v > 0 ? 'inf' : '-inf';
    if (v === 0) return '0';
    const a = Math.abs(v);
    if (a >= 1e-4 && a < 1e7) return String(Number(v.toPrecision(6)));
    return v.toExponential(3).replace(/\.?0+e/, 'e');
  }

  function fmtErr(v) {
    if (v === null || v === undefined) return 'n/a';
    return fmtNum(v);
  }

  function plural(n, word) { return `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`; }

  function jsonNum(v) { return typeof v === 'string' ? Number(v) : v; }

  function where(c) {
    const parts = [];
    if (c.step !== null && c.step !== undefined) parts.push(`step ${c.step}`);
    if (c.rank !== null && c.rank !== undefined) parts.push(`rank ${c.rank}`);
    return parts.join(' · ');
  }

  // ------------------------------------------------------------------------------ payload
  function base64Bytes(text) {
    const bin = atob(text);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  async function gunzip(bytes) {
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    return new Response(stream).arrayBuffer();
  }

  async function loadPayload() {
    const bytes = base64Bytes(byId('msq-data').textContent.trim());
    if (String.fromCharCode(...bytes.subarray(0, 4)) !== 'MSQR') throw new Error('not an msq report payload');
    const view = new DataView(bytes.buffer);
    const n = view.getUint32(4, true);
    const parts = [];
    let offset = 8 + 4 * n;
    for (let k = 0; k < n; k++) {
      const length = view.getUint32(8 + 4 * k, true);
      parts.push(gunzip(bytes.subarray(offset, offset + length)));
      offset += length;
    }
    const buffers = await Promise.all(parts);
    const meta = JSON.parse(new TextDecoder().decode(buffers[0]));
    return { meta, cols: decodeColumns(meta, buffers) };
  }

  function decodeColumns(meta, buffers) {
    const n = meta.rows;
    const cols = {};
    const typed = { f64: Float64Array, u32: Uint32Array, u16: Uint16Array, u8: Uint8Array };
    for (const [name, spec] of Object.entries(meta.row_columns)) {
      if (typed[spec.enc]) {
        const arr = new typed[spec.enc](buffers[spec.part], 0, n);
        if (spec.dict) {
          const dict = spec.dict;
          cols[name] = { codes: arr, dict, text: (i) => dict[arr[i]] };
        } else {
          cols[name] = { arr, num: (i) => arr[i], text: (i) => fmtNum(arr[i]) };
        }
      } else if (spec.enc === 'list') {
        const values = spec.values;
        cols[name] = { values, text: (i) => values[i] };
      }
    }
    for (const [name, spec] of Object.entries(meta.row_columns)) {
      if (spec.enc !== 'same') continue;
      const refs = spec.ref.map((r) => cols[r]);
      const except = new Map(spec.except);
      cols[name] = { text: (i) => (except.has(i) ? except.get(i) : refs.map((r) => r.text(i)).join('.')) };
    }
    return cols;
  }

  // ------------------------------------------------------------------------------ state
  const S = {
    meta: null, cols: null, sel: 0, view: null, pos: null, rowHeight: 24, focus: -1,
    filter: { text: '', mark: 'all', dir: 'all', io: 'all', blame: 'all' }, sort: { key: null, desc: false },
    chart: null, trend: null, heat: null, lower: null,
  };

  function compare() { return S.meta.compares[S.sel]; }
  function columnsOf(c) { return S.meta.columns[c.mode] || []; }

  // ------------------------------------------------------------------------------ header
  function verdictOf(c) {
    if (!c.n_matched) return { level: 'none', word: 'NOTHING COMPARED' };
    if (c.n_red > 0) return { level: 'fail', word: 'FAIL' };
    if (c.suspect) return { level: 'suspect', word: 'SUSPECT' };
    if (c.n_yellow > 0) return { level: 'check', word: 'CHECK' };
    return { level: 'pass', word: 'PASS' };
  }

  const LEVELS = ['pass', 'none', 'check', 'suspect', 'fail'];

  function drawHeader() {
    const m = S.meta, cs = m.compares;
    byId('title').textContent = m.title;
    const worst = cs.map(verdictOf).reduce((a, b) => (LEVELS.indexOf(b.level) > LEVELS.indexOf(a.level) ? b : a));
    const sum = (k) => cs.reduce((t, c) => t + (c[k] || 0), 0);
    const rows = sum('n_rows'), red = sum('n_red'), yellow = sum('n_yellow');
    const suspects = cs.filter((c) => c.suspect).length;
    const line = byId('verdict-line');
    line.replaceChildren(
      el('span', { class: `badge ${worst.level}`, id: 'verdict', text: worst.word }),
      el('span', { class: 'counts' },
        el('b', { class: 'red-text', text: plural(red, 'red row') }), ' · ',
        el('b', { class: 'yellow-text', text: plural(yellow, 'yellow row') }), ' · ',
        cs.length > 1 ? `${suspects} of ${cs.length} compares with an advisor suspect · ` : '',
        `${plural(rows, 'row')} (${sum('n_matched').toLocaleString('en-US')} matched, `
          + `${sum('n_npu_only')} NPU-only, ${sum('n_bench_only')} bench-only)`));
    drawEnters();
    drawFacts();
  }

  function drawEnters() {
    const box = byId('enters');
    const m = S.meta;
    const items = [];
    if (m.blame && m.local_sources.length) {
      box.append(el('div', { class: 'enters-title', text: 'Where the error enters (blame: local sources, worst first)' }));
      for (const s of m.local_sources.slice(0, 3)) {
        const c = compareById(s.compare_id);
        items.push(el('li', null,
          rowLink(c, s.out_seq, s.row_name),
          el('span', { class: 'muted', text: ` ${where(c) ? where(c) + ' · ' : ''}row ${sheetRow(s.out_seq)} · input error ${fmtErr(jsonNum(s.input_err))} → output error ${fmtErr(jsonNum(s.output_err))} (×${fmtNum(jsonNum(s.amplification))})` })));
      }
    } else {
      const withSuspect = m.compares.filter((c) => c.suspect)
        .sort((a, b) => (a.step ?? -1) - (b.step ?? -1) || a.suspect_line - b.suspect_line || (a.rank ?? -1) - (b.rank ?? -1));
      const why = m.blame ? 'blame found no local source' : 'blame not recorded';
      box.append(el('div', { class: 'enters-title', text: `Where the error enters (the advisor's first suspect; ${why})` }));
      if (!withSuspect.length) items.push(el('li', { class: 'muted', text: 'no suspect: every compared row passes the advisor\'s test' }));
      for (const c of withSuspect.slice(0, 3)) {
        items.push(el('li', null, rowLink(c, c.suspect_line, c.suspect),
          el('span', { class: 'muted', text: ` ${where(c) ? where(c) + ' · ' : ''}row ${sheetRow(c.suspect_line)}` })));
      }
      if (withSuspect.length > 3) items.push(el('li', { class: 'muted', text: `and ${withSuspect.length - 3} more compares` }));
    }
    box.append(el('ul', null, ...items));
  }

  function rowLink(c, outSeq, name) {
    return el('a', { href: '#', class: 'rowlink', text: name ?? '(unnamed)',
      onclick: (e) => { e.preventDefault(); jumpTo(c, outSeq); } });
  }

  function drawFacts() {
    const m = S.meta, cs = m.compares, c0 = cs[0];
    const dl = byId('facts');
    const add = (k, v) => { if (v !== null && v !== undefined && v !== '') dl.append(el('dt', { text: k }), el('dd', { text: v })); };
    const many = cs.length > 1;
    add('NPU dump', many ? commonRoot(cs.map((c) => c.npu_path)) : c0.npu_path);
    add('Bench dump', many ? commonRoot(cs.map((c) => c.bench_path)) : c0.bench_path);
    add('Mode', [...new Set(cs.map((c) => c.mode))].join(', ') + (c0.compat ? ` (--compat ${c0.compat})` : ' (default mode)'));
    const flags = [];
    if (c0.fuzzy) flags.push('-f fuzzy match');
    if (c0.stack) flags.push('-s stack');
    if (c0.auto_analyze === false) flags.push('-c compare only');
    if (c0.data_mapping) flags.push(`-dm ${c0.data_mapping}`);
    if (c0.api_mapping) flags.push(`-am ${c0.api_mapping}`);
    if (c0.cell_mapping) flags.push(`-cm ${c0.cell_mapping}`);
    if (c0.layer_mapping) flags.push(`-lm ${c0.layer_mapping}`);
    add('Flags', flags.length ? flags.join(', ') : 'none');
    if (c0.label) add('Label', c0.label);
    if (many) {
      const steps = new Set(cs.map((c) => c.step)), ranks = new Set(cs.map((c) => c.rank));
      add('Run', `${cs.length} compares: ${plural(steps.size, 'step')} × ${plural(ranks.size, 'rank')}`);
    } else if (where(c0)) add('Step / rank', where(c0));
    add('Source', m.origin === 'compare' ? 'msq compare --format html' : `history ${m.origin}, compare${many ? 's' : ''} ${cs.map((c) => c.compare_id).join(', ')}`);
    add('msq', `${c0.msq_version || m.msq_version} · report ${m.generated_at}`);
  }

  function commonRoot(paths) {
    const parts = paths.filter(Boolean).map((p) => p.split('/'));
    if (!parts.length) return '';
    let k = 0;
    while (parts.every((p) => p.length > k && p[k] === parts[0][k])) k++;
    return parts[0].slice(0, k).join('/') + '/…';
  }

  function compareById(id) { return S.meta.compares.find((c) => c.compare_id === id) || S.meta.compares[0]; }

  // ------------------------------------------------------------------------------ rows of a compare
  function seqIndex(c, outSeq) {
    const seq = S.cols.out_seq.arr;
    let lo = c.start, hi = c.end - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (seq[mid] === outSeq) return mid;
      if (seq[mid] < outSeq) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
  }

  function errState(i) { // 'none' (no figure), 'bad' (nan/inf), 'zero', 'ok'
    if (S.cols.err_none.arr[i]) return 'none';
    const v = S.cols.err.arr[i];
    if (!Number.isFinite(v)) return 'bad';
    return v <= 0 ? 'zero' : 'ok';
  }

  function lanesOf(c) {
    const err = S.cols.err.arr;
    let lo = Infinity, hi = -Infinity;
    for (let i = c.start; i < c.end; i++) {
      const v = err[i];
      if (v > 0 && Number.isFinite(v) && !S.cols.err_none.arr[i]) { if (v < lo) lo = v; if (v > hi) hi = v; }
    }
    if (lo === Infinity) { lo = 1; hi = 1; }
    // lanes a decade beyond the figures, kept inside the doubles a log scale can place
    const zero = 10 ** (Math.floor(Math.log10(Math.max(lo, 1e-290))) - 1);
    return { zero, none: zero / 10, bad: 10 ** (Math.ceil(Math.log10(Math.min(hi, 1e290))) + 1), lo, hi };
  }

  function plotY(i, lanes) {
    switch (errState(i)) {
      case 'none': return lanes.none;
      case 'bad': return lanes.bad;
      case 'zero': return lanes.zero;
      default: return S.cols.err.arr[i];
    }
  }

  // ------------------------------------------------------------------------------ chart
  function drawChart() {
    const c = compare();
    const host = byId('chart');
    if (S.chart) { S.chart.destroy(); S.chart = null; }
    host.replaceChildren();
    const n = c.end - c.start;
    const lanes = lanesOf(c);
    const xs = new Array(n), red = new Array(n).fill(null), yellow = new Array(n).fill(null),
      failing = new Array(n).fill(null), plain = new Array(n).fill(null), nofig = new Array(n).fill(null),
      inherited = new Array(n).fill(null);
    const mark = S.cols.mark, seq = S.cols.out_seq.arr, fails = S.cols.failing.arr;
    const counts = { red: 0, yellow: 0, failing: 0, plain: 0, nofig: 0, inherited: 0 };
    const verdict = S.meta.blame ? S.cols.blame_verdict : null;
    for (let k = 0; k < n; k++) {
      const i = c.start + k;
      xs[k] = seq[i];
      const y = plotY(i, lanes);
      const mk = mark.text(i);
      if (mk === 'red') { red[k] = y; counts.red++; } else if (mk === 'yellow') { yellow[k] = y; counts.yellow++; } else if (fails[i]) { failing[k] = y; counts.failing++; } else if (errState(i) === 'none') { nofig[k] = y; counts.nofig++; } else if (verdict && verdict.text(i) === 'inherited') { inherited[k] = y; counts.inherited++; } else { plain[k] = y; counts.plain++; }
    }
    const bands = directionRuns(c);
    const rings = ringRows(c);
    const size = n > 20000 ? 3 : n > 2000 ? 4 : 6;
    const pointSeries = (label, color) => ({
      label, stroke: color, fill: color, paths: () => null,
      points: { show: true, size, width: 0, fill: color, stroke: color },
    });
    const opts = {
      width: Math.max(320, host.clientWidth), height: 380,
      padding: [22, 12, 0, 0],  // room above the plot for the pass labels
      legend: { show: false },
      cursor: { x: false, y: false, points: { show: false }, drag: { x: true, y: false } },
      scales: { x: { time: false }, y: { distr: 3, range: [lanes.none / 2.5, lanes.bad * 2.5] } },
      axes: [
        { label: 'execution order (output line)', stroke: '#444', grid: { stroke: '#eef0f3' } },
        { label: errLabel(c), stroke: '#444', size: 78, labelGap: 4, grid: { stroke: '#eef0f3' },
          splits: () => ySplits(lanes), filter: (u, splits) => splits,
          values: (u, splits) => splits.map((v) => laneLabel(v, lanes)) },
      ],
      series: [{}, pointSeries('no error figure', NOFIG), pointSeries('unmarked', PLAIN),
        pointSeries('inherited (blame)', INHERITED), pointSeries("advisor's failing test", FAILING), pointSeries('yellow', YELLOW), pointSeries('red', RED)],
      hooks: {
        drawClear: [(u) => drawBands(u, bands, lanes)],
        draw: [(u) => drawPassLabels(u, bands), (u) => drawRings(u, rings, lanes), () => {
          // the first chart on screen, in ms since navigation start (bench/report_bench.py)
          if (window.msqReport.firstChartAt === undefined) window.msqReport.firstChartAt = performance.now();
        }],
      },
    };
    S.chart = new uPlot(opts, [xs, nofig, plain, inherited, failing, yellow, red], host);
    S.chart.msqRows = { start: c.start, xs, lanes };
    host.dataset.points = String(counts.red + counts.yellow + counts.failing + counts.plain + counts.nofig + counts.inherited);
    host.dataset.rows = String(n);
    S.chart.over.addEventListener('mousemove', (e) => chartHover(e));
    S.chart.over.addEventListener('mouseleave', hideTip);
    S.chart.over.addEventListener('click', (e) => {
      const hit = nearestPoint(e);
      if (hit >= 0) jumpTo(compare(), S.cols.out_seq.arr[hit]);
    });
    drawLegend(counts, rings, bands);
    byId('chart-hint').textContent = `${plural(n, 'point')} · hover for a row, click to open it in the table, drag to zoom, double-click to reset`;
  }

  function errLabel(c) {
    if (S.meta.blame) return 'error (blame)';
    return { statistics: 'relative error', tensor: '1 − cosine', md5: 'md5 differs' }[c.mode] || 'error';
  }

  function ySplits(l) {
    const out = [l.none, l.zero];
    for (let d = Math.log10(l.zero) + 1; d < Math.log10(l.bad) - 0.5; d++) out.push(10 ** d);
    out.push(l.bad);
    return out;
  }

  function laneLabel(v, l) {
    if (v === null || v === undefined || !(v > 0)) return '';
    if (Math.abs(v / l.none - 1) < 1e-9) return 'n/a';
    if (Math.abs(v / l.zero - 1) < 1e-9) return '0';
    if (Math.abs(v / l.bad - 1) < 1e-9) return 'nan/inf';
    const e = Math.round(Math.log10(v));
    return e >= -3 && e <= 3 ? String(Number(v.toPrecision(1))) : `1e${e}`;
  }

  function directionRuns(c) {
    const dir = S.cols.direction, seq = S.cols.out_seq.arr;
    const runs = [];
    let cur = null;
    for (let i = c.start; i < c.end; i++) {
      const d = dir.text(i) || 'other';
      if (!cur || cur.dir !== d) { cur = { dir: d, x0: seq[i], x1: seq[i] }; runs.push(cur); } else cur.x1 = seq[i];
    }
    return runs;
  }

  function ringRows(c) {
    const rows = [];
    if (S.meta.blame) {
      const v = S.cols.blame_verdict, rank = S.cols.blame_rank.arr;
      for (let i = c.start; i < c.end; i++) if (v.text(i) === 'local') rows.push({ i, label: `local #${fmtNum(rank[i])}` });
    } else if (c.suspect_line !== null && c.suspect_line !== undefined) {
      const i = seqIndex(c, c.suspect_line);
      if (i >= 0) rows.push({ i, label: 'first suspect' });
    }
    return rows;
  }

  function drawBands(u, runs, lanes) {
    const ctx = u.ctx, top = u.bbox.top, h = u.bbox.height;
    ctx.save();
    const laneTop = u.valToPos(lanes.zero * 3.2, 'y', true), laneBottom = u.bbox.top + u.bbox.height;
    ctx.fillStyle = 'rgba(120,130,145,0.07)';
    ctx.fillRect(u.bbox.left, laneTop, u.bbox.width, laneBottom - laneTop);
    const badBottom = u.valToPos(lanes.bad / 3.2, 'y', true);
    ctx.fillStyle = 'rgba(215,38,61,0.06)';
    ctx.fillRect(u.bbox.left, top, u.bbox.width, badBottom - top);
    const dpr = devicePixelRatio || 1;
    for (const r of runs) {
      const x0 = Math.max(u.bbox.left, u.valToPos(r.x0 - 0.5, 'x', true));
      const x1 = Math.min(u.bbox.left + u.bbox.width, u.valToPos(r.x1 + 0.5, 'x', true));
      if (x1 <= x0) continue;
      if (r.dir === 'backward') {
        ctx.fillStyle = 'rgba(111,66,193,0.08)';
        ctx.fillRect(x0, top, x1 - x0, h);
      }
      if (r.dir === 'backward' && x0 > u.bbox.left + 1) {
        ctx.strokeStyle = '#6f42c1';
        ctx.setLineDash([4 * dpr, 3 * dpr]);
        ctx.beginPath(); ctx.moveTo(x0, top); ctx.lineTo(x0, top + h); ctx.stroke();
        ctx.setLineDash([]);
      }
    }
    ctx.restore();
  }

  function drawPassLabels(u, runs) {
    // above the plot: the pass of each stretch of the execution order
    const ctx = u.ctx, dpr = devicePixelRatio || 1, top = u.bbox.top - 17 * dpr;
    ctx.save();
    ctx.font = `${11 * dpr}px system-ui, sans-serif`;
    ctx.textBaseline = 'top';
    ctx.textAlign = 'left';  // uPlot leaves its axes' alignment set
    for (const r of runs) {
      const x0 = Math.max(u.bbox.left, u.valToPos(r.x0 - 0.5, 'x', true));
      const x1 = Math.min(u.bbox.left + u.bbox.width, u.valToPos(r.x1 + 0.5, 'x', true));
      if (x1 - x0 <= 70 * dpr) continue;
      const text = r.dir === 'backward' ? 'backward ▸' : r.dir === 'forward' ? 'forward ▸' : (r.dir || 'other');
      ctx.lineWidth = 3 * dpr;
      ctx.strokeStyle = 'rgba(255,255,255,0.9)';
      ctx.strokeText(text, x0 + 5 * dpr, top + 2 * dpr);
      ctx.fillStyle = r.dir === 'backward' ? '#6f42c1' : '#5a6570';
      ctx.fillText(text, x0 + 5 * dpr, top + 2 * dpr);
    }
    ctx.restore();
  }

  function drawRings(u, rings, lanes) {
    const ctx = u.ctx, dpr = devicePixelRatio || 1;
    ctx.save();
    ctx.lineWidth = 2 * dpr;
    ctx.strokeStyle = '#111';
    ctx.fillStyle = '#111';
    ctx.font = `bold ${11 * dpr}px system-ui, sans-serif`;
    ctx.textAlign = 'left';
    ctx.textBaseline = 'alphabetic';
    for (const r of rings.slice(0, 50)) {
      const x = u.valToPos(S.cols.out_seq.arr[r.i], 'x', true), y = u.valToPos(plotY(r.i, lanes), 'y', true);
      if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
      ctx.beginPath(); ctx.arc(x, y, 7 * dpr, 0, 2 * Math.PI); ctx.stroke();
      ctx.lineWidth = 3 * dpr; ctx.strokeStyle = 'rgba(255,255,255,0.9)';
      ctx.strokeText(r.label, x + 9 * dpr, y - 14 * dpr);
      ctx.fillText(r.label, x + 9 * dpr, y - 14 * dpr);
      ctx.lineWidth = 2 * dpr; ctx.strokeStyle = '#111';
    }
    ctx.restore();
  }

  function drawLegend(counts, rings, bands) {
    const dot = (color) => el('span', { class: 'dot', style: `background:${color}` });
    const items = [
      el('span', null, dot(RED), `red (${counts.red.toLocaleString('en-US')})`),
      el('span', null, dot(YELLOW), `yellow (${counts.yellow.toLocaleString('en-US')})`),
      el('span', null, dot(FAILING), `unmarked, failing the advisor's test (${counts.failing.toLocaleString('en-US')})`),
      el('span', null, dot(PLAIN), `unmarked, passing${S.meta.blame ? ', not inherited' : ''} (${counts.plain.toLocaleString('en-US')})`),
      S.meta.blame ? el('span', null, dot(INHERITED), `unmarked, passing, error inherited from its inputs (blame) (${counts.inherited.toLocaleString('en-US')})`) : '',
      el('span', null, dot(NOFIG), `no error figure, lane n/a (${counts.nofig.toLocaleString('en-US')})`),
    ];
    if (rings.length) items.push(el('span', null, el('span', { class: 'ring' }), S.meta.blame ? 'local source (blame)' : "advisor's first suspect"));
    if (bands.some((b) => b.dir === 'backward')) items.push(el('span', null, el('span', { class: 'swatch bwd' }), 'backward pass'));
    items.push(el('span', { class: 'muted', text: figureNote(compare()) }));
    byId('legend').replaceChildren(...items);
  }

  function figureNote(c) {
    if (S.meta.blame) return 'y: the blame output error of each row';
    return {
      statistics: 'y: larger of |MaxRelativeErr| and |NormRelativeErr|, as a ratio',
      tensor: 'y: 1 − Cosine (MaxAbsErr where there is no cosine)',
      md5: 'y: 1 where the MD5s differ, 0 where equal',
    }[c.mode] || '';
  }

  function nearestPoint(e) {
    const u = S.chart, r = u.msqRows;
    const rect = u.over.getBoundingClientRect();
    const px = e.clientX - rect.left, py = e.clientY - rect.top;
    const xs = r.xs;
    const lo = lowerBound(xs, u.posToVal(px - 10, 'x')), hi = lowerBound(xs, u.posToVal(px + 10, 'x'));
    let best = -1, bestD = 144;
    for (let k = lo; k < Math.min(hi + 1, xs.length); k++) {
      const i = r.start + k;
      const dx = u.valToPos(xs[k], 'x') - px, dy = u.valToPos(plotY(i, r.lanes), 'y') - py;
      const d = dx * dx + dy * dy;
      if (d < bestD) { bestD = d; best = i; }
    }
    return best;
  }

  function lowerBound(arr, v) {
    let lo = 0, hi = arr.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (arr[mid] < v) lo = mid + 1; else hi = mid; }
    return lo;
  }

  function chartHover(e) {
    const i = nearestPoint(e);
    if (i < 0) { hideTip(); return; }
    showTip(e, rowSummary(i, compare()));
  }

  function rowSummary(i, c) {
    const cols = S.cols;
    const lines = [el('div', { class: 'tip-name', text: cols.npu_name.text(i) ?? cols.bench_name.text(i) ?? '' })];
    const bench = cols.bench_name.text(i);
    if (bench !== null && bench !== cols.npu_name.text(i)) lines.push(el('div', { class: 'muted', text: `bench: ${bench ?? '(none)'}` }));
    lines.push(el('div', { text: `row ${sheetRow(cols.out_seq.arr[i])} · ${cols.direction.text(i) || 'other'} · ${cols.io.text(i)} · ${cols.kind.text(i)}` }));
    const mk = cols.mark.text(i);
    if (mk) lines.push(el('div', { class: `${mk}-text`, text: `${mk}: ${cols.mark_rules.text(i) || ''}` }));
    if (cols.failing.arr[i]) lines.push(el('div', { text: `advisor: ${cols.result.text(i)}` }));
    lines.push(el('div', { text: `error: ${errState(i) === 'none' ? 'n/a' : fmtNum(cols.err.arr[i])} (${cols.err_kind.text(i) || ''})` }));
    const keys = { statistics: ['MaxRelativeErr', 'NormRelativeErr', 'Max diff'], tensor: ['Cosine', 'MaxAbsErr', 'MaxRelativeErr'], md5: ['NPU MD5', 'BENCH MD5'] }[c.mode] || [];
    for (const col of columnsOf(c)) if (keys.includes(col.label)) lines.push(el('div', { text: `${col.label}: ${cellText(col, i)}` }));
    if (S.meta.blame && cols.blame_verdict.text(i)) {
      lines.push(el('div', { text: `blame: ${cols.blame_verdict.text(i)} · input ${fmtNum(cols.blame_input_err.arr[i])} → output ${fmtNum(cols.err.arr[i])} (×${fmtNum(cols.blame_amplification.arr[i])})` }));
      const why = cols.blame_reason.text(i);
      if (why) lines.push(el('div', { class: 'muted', text: why }));
    }
    return lines;
  }

  function showTip(e, children) {
    const tip = byId('tip');
    tip.replaceChildren(...children);
    tip.hidden = false;
    const w = tip.offsetWidth, h = tip.offsetHeight;
    let x = e.clientX + 14, y = e.clientY + 14;
    if (x + w > window.innerWidth - 8) x = e.clientX - w - 14;
    if (y + h > window.innerHeight - 8) y = e.clientY - h - 14;
    tip.style.left = `${Math.max(4, x)}px`;
    tip.style.top = `${Math.max(4, y)}px`;
  }

  function hideTip() { byId('tip').hidden = true; }

  // ------------------------------------------------------------------------------ table
  const EXTRA_COLUMNS = [
    { label: 'Error', key: 'err', kind: 'err', width: 90 },
    { label: 'Mark rules', key: 'mark_rules', kind: 'text', width: 170 },
    { label: 'Pass', key: 'direction', kind: 'text', width: 76 },
    { label: 'Arg', key: 'io', kind: 'text', width: 60 },
  ];
  const BLAME_COLUMNS = [
    { label: 'Blame', key: 'blame_verdict', kind: 'text', width: 76 },
    { label: 'Input err', key: 'blame_input_err', kind: 'num', width: 90 },
    { label: 'Amplification', key: 'blame_amplification', kind: 'num', width: 100 },
  ];

  function tableColumns(c) {
    const cols = [{ label: 'Row', key: 'out_seq', kind: 'row', width: 64, sticky: true }];
    for (const col of columnsOf(c)) {
      const width = /Name$/.test(col.label) ? 300 : col.label === 'NPU_Stack_Info' ? 260 : col.label === 'Err_message' ? 200 : col.kind === 'text' ? 110 : 116;
      cols.push({ ...col, width, sticky: col.label === 'NPU Name' });
    }
    cols.push(...EXTRA_COLUMNS);
    if (S.meta.blame) cols.push(...BLAME_COLUMNS);
    return cols;
  }

  // The row a user sees in the workbook (header in row 1), as the console and the default
  // advisor say it; the page's data keep the 0-based output line (out_seq).
  function sheetRow(seq) { return seq === null || seq === undefined ? 'NA' : seq + 2; }

  // The advisor file's Line: the sheet row in the default mode, msprobe's 0-based line in compat.
  function advisorLine(c) {
    if (c.suspect_line === null || c.suspect_line === undefined) return 'NA';
    return c.compat ? c.suspect_line : sheetRow(c.suspect_line);
  }

  function cellText(col, i) {
    const cols = S.cols;
    if (col.kind === 'err') return errState(i) === 'none' ? '' : fmtNum(cols.err.arr[i]);
    if (col.kind === 'int') return String(cols[col.key].arr[i]);
    if (col.kind === 'row') return String(sheetRow(cols[col.key].arr[i]));
    if (col.kind === 'num' || col.kind === 'pct') {
      const show = cols[`${col.key}__show`];
      const s = show ? show.text(i) : null;
      if (s !== null && s !== undefined) return s;
      const v = cols[col.key].arr[i];
      return col.kind === 'pct' ? `${fmtNum(v)}%` : fmtNum(v);
    }
    const v = cols[col.key] ? cols[col.key].text(i) : null;
    return v ?? '';
  }

  function sortValue(col, i) {
    const cols = S.cols;
    if (col.kind === 'err') return errState(i) === 'none' ? null : cols.err.arr[i];
    if (col.kind === 'int' || col.kind === 'row') return cols[col.key].arr[i];
    if (col.kind === 'num' || col.kind === 'pct') {
      const show = cols[`${col.key}__show`];
      if (show && show.codes && show.codes[i] && show.text(i) !== 'nan') return null;
      return cols[col.key].arr[i];
    }
    return cols[col.key] ? cols[col.key].text(i) : null;
  }

  function buildTableHead() {
    const c = compare();
    S.tcols = tableColumns(c);
    const table = byId('rows');
    const colgroup = el('colgroup', null, ...S.tcols.map((col) => el('col', { style: `width:${col.width}px` })));
    table.querySelector('colgroup')?.remove();
    table.prepend(colgroup);
    table.style.width = `${S.tcols.reduce((t, col) => t + col.width, 0)}px`;
    let left = 0;
    const ths = S.tcols.map((col) => {
      const arrow = S.sort.key === col.key ? (S.sort.desc ? ' ▼' : ' ▲') : '';
      const th = el('th', { title: `sort by ${col.label}`, data: { key: col.key }, class: col.sticky ? 'sticky' : null, style: col.sticky ? `left:${left}px` : null, text: col.label + arrow, onclick: () => sortBy(col) });
      if (col.sticky) left += col.width;
      return th;
    });
    table.querySelector('thead').replaceChildren(el('tr', null, ...ths));
  }

  function sortBy(col) {
    if (S.sort.key === col.key) S.sort.desc = !S.sort.desc; else { S.sort.key = col.key; S.sort.desc = col.kind !== 'text'; }
    rebuildView();
  }

  function buildFilters() {
    const f = S.filter;
    const select = (id, label, options, key) => el('label', null, label, ' ', el('select', { id, onchange: (e) => { f[key] = e.target.value; rebuildView(); } },
      ...options.map(([v, t]) => el('option', { value: v, text: t, selected: f[key] === v ? 'selected' : null }))));
    let timer = 0;
    const text = el('input', { id: 'f-text', type: 'search', placeholder: 'name contains…', value: f.text,
      oninput: (e) => { clearTimeout(timer); timer = setTimeout(() => { f.text = e.target.value; rebuildView(); }, 150); } });
    byId('filters').replaceChildren(
      el('label', null, 'Name ', text),
      select('f-mark', 'Mark', [['all', 'all'], ['red', 'red'], ['yellow', 'yellow'], ['marked', 'red or yellow'], ['failing', "advisor's failing test"], ['none', 'unmarked']], 'mark'),
      select('f-dir', 'Pass', [['all', 'all'], ['forward', 'forward'], ['backward', 'backward']], 'dir'),
      select('f-io', 'Arg', [['all', 'all'], ['input', 'input'], ['output', 'output']], 'io'),
      S.meta.blame ? select('f-blame', 'Blame', [['all', 'all'], ['local', 'local: the error enters'], ['inherited', 'inherited from inputs'], ['clean', 'clean'], ['none', 'not judged']], 'blame') : '',
      el('button', { type: 'button', text: 'Clear', onclick: () => { resetFilters(); buildFilters(); rebuildView(); } }));
  }

  function resetFilters() { S.filter = { text: '', mark: 'all', dir: 'all', io: 'all', blame: 'all' }; S.sort = { key: null, desc: false }; }

  function lowerNames() {
    if (!S.lower) {
      const n = S.meta.rows, a = S.cols.npu_name, b = S.cols.bench_name;
      S.lower = new Array(n);
      for (let i = 0; i < n; i++) S.lower[i] = `${a.text(i) ?? ''}\u0000${b.text(i) ?? ''}`.toLowerCase();
    }
    return S.lower;
  }

  function sortRows(out, col, desc) {
    // keys by position, then one comparator over plain arrays (100k rows: a few hundred ms)
    const n = out.length, numeric = col.kind !== 'text';
    const keys = numeric ? new Float64Array(n) : new Array(n);
    const missing = new Uint8Array(n);
    for (let p = 0; p < n; p++) {
      const v = sortValue(col, out[p]);
      if (v === null || v === undefined) missing[p] = 1;
      else keys[p] = numeric && Number.isNaN(v) ? Infinity : v;  // nan above every number, as in SQL
    }
    const order = Array.from({ length: n }, (_, p) => p);
    const sign = desc ? -1 : 1;
    order.sort((a, b) => {
      if (missing[a] || missing[b]) return missing[a] === missing[b] ? a - b : missing[a] ? 1 : -1;
      const x = keys[a], y = keys[b];
      return x < y ? -sign : x > y ? sign : a - b;
    });
    const rows = order.map((p) => out[p]);
    for (let p = 0; p < n; p++) out[p] = rows[p];
  }

  function rebuildView() {
    const c = compare(), f = S.filter, cols = S.cols;
    const needle = f.text.trim().toLowerCase();
    const names = needle ? lowerNames() : null;
    const out = [];
    for (let i = c.start; i < c.end; i++) {
      if (needle && !names[i].includes(needle)) continue;
      const mk = cols.mark.text(i);
      if (f.mark === 'red' && mk !== 'red') continue;
      if (f.mark === 'yellow' && mk !== 'yellow') continue;
      if (f.mark === 'marked' && !mk) continue;
      if (f.mark === 'none' && mk) continue;
      if (f.mark === 'failing' && !cols.failing.arr[i]) continue;
      if (f.dir !== 'all' && cols.direction.text(i) !== f.dir) continue;
      if (f.io !== 'all' && cols.io.text(i) !== f.io) continue;
      if (f.blame !== 'all' && (cols.blame_verdict.text(i) ?? 'none') !== f.blame) continue;
      out.push(i);
    }
    if (S.sort.key !== null) sortRows(out, S.tcols.find((t) => t.key === S.sort.key), S.sort.desc);
    S.view = Int32Array.from(out);
    S.pos = new Map();
    for (let p = 0; p < out.length; p++) S.pos.set(out[p], p);
    buildTableHead();
    byId('table-count').textContent = `${plural(out.length, 'row')} shown of ${(c.end - c.start).toLocaleString('en-US')}${where(c) ? ' · ' + where(c) : ''}`;
    byId('table-wrap').scrollTop = 0;
    renderRows();
  }

  function renderRows() {
    const wrap = byId('table-wrap'), body = byId('rows').querySelector('tbody');
    const rh = S.rowHeight, total = S.view.length;
    const first = Math.max(0, Math.floor(wrap.scrollTop / rh) - 8);
    // the wrap shrinks to a short table: rows for its full height (its CSS max-height)
    const count = Math.ceil(Math.max(wrap.clientHeight, Math.min(innerHeight * 0.7, 760)) / rh) + 16;
    const last = Math.min(total, first + count);
    const spacer = (h) => (h > 0 ? el('tr', { class: 'spacer' }, el('td', { colspan: S.tcols.length, style: `height:${h}px` })) : null);
    const trs = [spacer(first * rh)];
    for (let p = first; p < last; p++) trs.push(rowElement(S.view[p]));
    trs.push(spacer((total - last) * rh));
    if (!total) trs.push(el('tr', null, el('td', { colspan: S.tcols.length, class: 'muted', text: 'no row matches the filters' })));
    body.replaceChildren(...trs.filter(Boolean));
  }

  function rowElement(i) {
    const mk = S.cols.mark.text(i);
    const cls = [mk ? `mark-${mk}` : '', i === S.focus ? 'focus' : ''].join(' ').trim();
    let left = 0;
    const tds = S.tcols.map((col) => {
      const text = cellText(col, i);
      const td = el('td', { title: text.length > 14 ? text : null, class: col.sticky ? 'sticky' : null, style: col.sticky ? `left:${left}px` : null, text });
      if (col.sticky) left += col.width;
      return td;
    });
    return el('tr', { class: cls || null, data: { seq: S.cols.out_seq.arr[i], row: i } }, ...tds);
  }

  function jumpTo(c, outSeq) {
    const ord = S.meta.compares.indexOf(c);
    if (ord !== S.sel) selectCompare(ord);
    const i = seqIndex(c, outSeq);
    if (i < 0) return;
    if (!S.pos.has(i)) { resetFilters(); buildFilters(); rebuildView(); }
    S.focus = i;
    const wrap = byId('table-wrap');
    byId('table-sec').scrollIntoView({ block: 'start' });
    wrap.scrollTop = Math.max(0, S.pos.get(i) * S.rowHeight - wrap.clientHeight / 3);
    renderRows();
  }

  // ------------------------------------------------------------------------------ findings
  function drawFindings() {
    const box = byId('findings'), c = compare();
    const advisor = el('div', { class: 'card advisor' }, el('h3', { text: `Advisor${S.meta.compares.length > 1 ? ' · ' + where(c) : ''}` }));
    if (c.auto_analyze === false) advisor.append(el('p', { class: 'muted', text: 'compared with -c: no advisor file was written' }));
    advisor.append(
      el('div', null, el('b', { text: 'Line: ' }), advisorLine(c)),
      el('div', null, el('b', { text: 'Suspect Nodes: ' }), c.suspect ? rowLink(c, c.suspect_line, c.suspect) : 'NA'),
      el('div', { class: 'advice' }, el('b', { text: 'Expert Advice: ' }), c.advice ?? '(not available)'));
    const cards = [advisor];
    if (S.meta.blame) cards.push(blameCard());
    const rules = new Map();
    for (const f of S.meta.findings) {
      const key = `${f.mark}\u0000${f.rule}`;
      if (!rules.has(key)) rules.set(key, []);
      rules.get(key).push(f);
    }
    for (const rows of rules.values()) {
      const rule = rows[0].rule;
      const mk = rows[0].mark;
      const card = el('div', { class: 'card' },
        el('h3', null, el('span', { class: `chip ${mk || 'advisor'}`, text: mk || 'advisor' }), ' ', rule,
          el('span', { class: 'muted', text: ` · ${plural(rows[0].n_rule, 'row')}` })));
      const list = el('ol');
      for (const f of rows) {
        const fc = compareById(f.compare_id);
        list.append(el('li', null, rowLink(fc, f.out_seq, f.row_name),
          el('span', { class: 'muted', text: ` ${S.meta.compares.length > 1 ? where(fc) + ' · ' : ''}row ${sheetRow(f.out_seq)} · error ${fmtErr(jsonNum(f.err))}` })));
      }
      card.append(list);
      cards.push(card);
    }
    if (!rules.size) cards.push(el('div', { class: 'card muted', text: 'No row is marked or fails the advisor\'s test.' }));
    box.replaceChildren(...cards);
  }

  function blameCard() {
    // where the error enters, over every compare of the page, worst first (blame_rank)
    const m = S.meta, many = m.compares.length > 1;
    const card = el('div', { class: 'card blame' },
      el('h3', null, el('span', { class: 'chip local', text: 'blame' }), ' local sources: where the error enters',
        el('span', { class: 'muted', text: ` · ${plural(m.local_sources.length, 'row')}${m.local_sources.length === 20 ? ' or more' : ''}` })));
    if (!m.local_sources.length) {
      card.append(el('p', { class: 'muted', text: 'no local source: every error is explained by its inputs or within the floor' }));
      return card;
    }
    const list = el('ol');
    for (const s of m.local_sources.slice(0, 5)) {
      const c = compareById(s.compare_id);
      list.append(el('li', null, rowLink(c, s.out_seq, s.row_name),
        el('span', { class: 'muted', text: ` ${many && where(c) ? where(c) + ' · ' : ''}row ${sheetRow(s.out_seq)} · input ${fmtErr(jsonNum(s.input_err))} → output ${fmtErr(jsonNum(s.output_err))}${s.reason ? ' · ' + s.reason : ''}` })));
    }
    card.append(list, el('div', { class: 'muted', text: 'The table\'s Blame filter shows local, inherited or clean rows.' }));
    return card;
  }

  // ------------------------------------------------------------------------------ compare choice
  function compareLabel(c) {
    const v = verdictOf(c);
    return `${where(c) || 'compare ' + c.compare_id} · ${v.word} · ${c.n_red} red, ${c.n_yellow} yellow · ${c.n_rows} rows`;
  }

  function buildCompareSelect() {
    const cs = S.meta.compares;
    if (cs.length < 2) return;
    const sel = el('select', { id: 'compare-select', onchange: (e) => { selectCompare(Number(e.target.value)); } },
      ...cs.map((c, k) => el('option', { value: k, text: compareLabel(c) })));
    byId('chart-controls').replaceChildren(el('label', null, 'Compare ', sel));
  }

  function selectCompare(ord) {
    S.sel = ord;
    S.focus = -1;
    const sel = byId('compare-select');
    if (sel) sel.value = String(ord);
    drawChart();
    drawFindings();
    rebuildView();
    if (S.heat) drawHeat();
  }

  // ------------------------------------------------------------------------------ run: rank x op
  function buildRun() {
    const cs = S.meta.compares;
    if (cs.length < 2) return;
    byId('run').hidden = false;
    const opCol = S.cols.op_name, seq = S.cols.out_seq.arr, err = S.cols.err.arr, io = S.cols.io;
    const ids = new Map(), names = [], firstSeq = [];
    const opOf = new Int32Array(S.meta.rows);
    for (let i = 0; i < S.meta.rows; i++) {
      const name = opCol.text(i) ?? '';
      let id = ids.get(name);
      if (id === undefined) { id = names.length; ids.set(name, id); names.push(name); firstSeq.push(seq[i]); } else if (seq[i] < firstSeq[id]) firstSeq[id] = seq[i];
      opOf[i] = id;
    }
    const order = names.map((_, k) => k).sort((a, b) => firstSeq[a] - firstSeq[b] || a - b);
    const col = new Int32Array(names.length);
    order.forEach((id, k) => { col[id] = k; });
    // per compare and op: worst error of its outputs (of any row when it has no output figure)
    const nOps = names.length;
    const cells = cs.map((c) => {
      const out = new Float64Array(nOps).fill(-1), any = new Float64Array(nOps).fill(-1);
      for (let i = c.start; i < c.end; i++) {
        const st = errState(i);
        if (st === 'none') continue;
        const v = st === 'bad' ? Infinity : err[i];
        const k = col[opOf[i]];
        if (v > any[k]) any[k] = v;
        if (io.text(i) === 'output' && v > out[k]) out[k] = v;
      }
      for (let k = 0; k < nOps; k++) if (out[k] < 0) out[k] = any[k];
      return out;
    });
    const steps = [...new Set(cs.map((c) => c.step))].sort((a, b) => (a ?? -1) - (b ?? -1));
    const firstDiv = firstDivergence(opOf, col);
    S.heat = { names: order.map((id) => names[id]), opOf, col, cells, steps, step: firstDiv ? firstDiv.c.step : steps[0], firstDiv };
    if (steps.length > 1) {
      const sel = el('select', { id: 'step-select', onchange: (e) => { S.heat.step = steps[Number(e.target.value)]; drawHeat(); } },
        ...steps.map((s, k) => el('option', { value: k, text: `step ${s ?? '—'}`, selected: s === S.heat.step ? 'selected' : null })));
      byId('run-controls').replaceChildren(el('label', null, 'Step ', sel));
    }
    const heat = byId('heat');
    heat.addEventListener('mousemove', heatHover);
    heat.addEventListener('mouseleave', hideTip);
    heat.addEventListener('click', heatClick);
    drawHeat();
    drawTrend();
  }

  function firstDivergence(opOf, col) {
    // the blame's worst local source when blame exists (the console names the run's first one:
    // both are where an error enters), else the earliest divergent row over the run (step
    // first, then execution order, then rank)
    const found = [];
    if (S.meta.blame && S.meta.local_sources.length) {
      const s = S.meta.local_sources[0];
      const c = compareById(s.compare_id), i = seqIndex(c, s.out_seq);
      if (i >= 0) return { c, i, op: col[opOf[i]], why: 'worst local source (blame)', all: [] };
    }
    for (const d of S.meta.divergence) {
      const c = compareById(d.compare_id), i = seqIndex(c, d.out_seq);
      if (i >= 0) found.push({ c, i, op: col[opOf[i]], reason: d.reason });
    }
    if (!found.length) return null;
    found.sort((a, b) => (a.c.step ?? -1) - (b.c.step ?? -1) || S.cols.out_seq.arr[a.i] - S.cols.out_seq.arr[b.i] || (a.c.rank ?? -1) - (b.c.rank ?? -1));
    return { ...found[0], why: 'first divergence', all: found };
  }

  const PALETTE = ['#fff5c2', '#fee391', '#fec44f', '#fe9929', '#ec7014', '#cc4c02', '#993404', '#662506'];

  function heatColor(v, lo, hi) {
    if (v < 0) return null;
    if (v === 0) return '#e8eef5';
    if (!Number.isFinite(v)) return '#1b1b1b';
    const t = hi > lo ? (Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo)) : 1;
    return PALETTE[Math.max(0, Math.min(PALETTE.length - 1, Math.floor(t * PALETTE.length)))];
  }

  function heatLayout() {
    const H = S.heat, cs = S.meta.compares;
    const rowsIdx = cs.map((c, k) => k).filter((k) => cs[k].step === H.step).sort((a, b) => (cs[a].rank ?? -1) - (cs[b].rank ?? -1));
    const canvas = byId('heat');
    const width = Math.max(300, byId('heat-wrap').clientWidth);
    const left = 78, top = 26, nOps = H.names.length;
    const plotW = width - left - 8;
    const rowH = Math.max(12, Math.min(30, Math.floor(240 / Math.max(1, rowsIdx.length))));
    return { rowsIdx, canvas, width, left, top, plotW, rowH, height: top + rowH * rowsIdx.length + 34, nOps };
  }

  function drawHeat() {
    const H = S.heat, L = heatLayout(), cs = S.meta.compares;
    const dpr = devicePixelRatio || 1, canvas = L.canvas;
    canvas.width = L.width * dpr; canvas.height = L.height * dpr;
    canvas.style.width = `${L.width}px`; canvas.style.height = `${L.height}px`;
    const ctx = canvas.getContext('2d');
    ctx.scale(dpr, dpr);
    ctx.font = '12px system-ui, sans-serif';
    let lo = Infinity, hi = 0;
    for (const k of L.rowsIdx) for (const v of H.cells[k]) if (v > 0 && Number.isFinite(v)) { if (v < lo) lo = v; if (v > hi) hi = v; }
    if (lo === Infinity) { lo = 1; hi = 1; }
    H.range = { lo, hi };
    const cols = Math.min(L.nOps, Math.floor(L.plotW));
    const perCol = L.nOps / Math.max(1, cols), cw = L.plotW / Math.max(1, cols);
    L.rowsIdx.forEach((k, r) => {
      const cells = H.cells[k], y = L.top + r * L.rowH;
      ctx.fillStyle = k === S.sel ? '#111' : '#444';
      ctx.textBaseline = 'middle';
      ctx.fillText(`rank ${cs[k].rank ?? '—'}`, 6, y + L.rowH / 2);
      for (let x = 0; x < cols; x++) {
        const a = Math.floor(x * perCol), b = Math.max(a + 1, Math.floor((x + 1) * perCol));
        let v = -1;
        for (let j = a; j < b; j++) if (cells[j] > v) v = cells[j];
        const color = heatColor(v, lo, hi);
        ctx.fillStyle = color || '#ffffff';
        ctx.fillRect(L.left + x * cw, y, Math.ceil(cw), L.rowH - 1);
      }
      if (k === S.sel) { ctx.strokeStyle = '#3a6ea5'; ctx.lineWidth = 1; ctx.strokeRect(L.left - 0.5, y - 0.5, L.plotW + 1, L.rowH); }
    });
    // each rank's first divergence, and the run's first one
    const fd = H.firstDiv;
    if (fd) {
      for (const d of fd.all || []) {
        const r = L.rowsIdx.indexOf(S.meta.compares.indexOf(d.c));
        if (r < 0) continue;
        const x = L.left + Math.floor(d.op / perCol) * cw;
        ctx.strokeStyle = '#1f6feb'; ctx.lineWidth = 2;
        ctx.strokeRect(x - 2, L.top + r * L.rowH - 1, Math.max(cw, 2) + 4, L.rowH + 1);
      }
      const r = L.rowsIdx.indexOf(S.meta.compares.indexOf(fd.c));
      if (r >= 0) {
        const x = L.left + Math.floor(fd.op / perCol) * cw;
        ctx.strokeStyle = '#000'; ctx.lineWidth = 3;
        ctx.strokeRect(x - 3, L.top + r * L.rowH - 2, Math.max(cw, 2) + 6, L.rowH + 3);
        ctx.fillStyle = '#000'; ctx.textBaseline = 'bottom'; ctx.font = 'bold 12px system-ui, sans-serif';
        const label = `▼ ${fd.why}: rank ${fd.c.rank ?? '—'} · ${H.names[fd.op]}`;
        const tw = ctx.measureText(label).width;
        ctx.fillText(label, Math.max(L.left, Math.min(x - 6, L.width - tw - 4)), L.top - 4);
      }
    }
    drawHeatAxis(L, lo, hi);
    byId('run-hint').textContent = `${plural(L.nOps, 'op')} in execution order × ${plural(L.rowsIdx.length, 'rank')}${H.steps.length > 1 ? ` · step ${H.step}` : ''} · colour: worst output error of the op · click a cell to open its rows`;
  }

  function drawHeatAxis(L, lo, hi) {
    const box = byId('heat-axis');
    const stops = PALETTE.map((c) => el('span', { class: 'stop', style: `background:${c}` }));
    box.replaceChildren(
      el('span', { class: 'muted', text: `error ${fmtNum(lo)}` }), ...stops, el('span', { class: 'muted', text: `${fmtNum(hi)}` }),
      el('span', { class: 'stop', style: 'background:#e8eef5;margin-left:14px' }), el('span', { class: 'muted', text: '0' }),
      el('span', { class: 'stop', style: 'background:#1b1b1b;margin-left:14px' }), el('span', { class: 'muted', text: 'nan/inf' }),
      el('span', { class: 'stop', style: 'background:#fff;border:1px solid #ccc;margin-left:14px' }), el('span', { class: 'muted', text: 'no data' }),
      el('span', { class: 'stop', style: 'background:#fff;border:2px solid #1f6feb;margin-left:14px' }), el('span', { class: 'muted', text: 'first divergence of a rank' }),
      el('span', { class: 'stop', style: 'background:#fff;border:3px solid #000;margin-left:14px' }), el('span', { class: 'muted', text: S.heat.firstDiv ? S.heat.firstDiv.why + ' (run)' : 'run' }));
  }

  function heatCell(e) {
    const H = S.heat, L = heatLayout();
    const rect = L.canvas.getBoundingClientRect();
    const x = e.clientX - rect.left, y = e.clientY - rect.top;
    const r = Math.floor((y - L.top) / L.rowH);
    if (x < L.left || r < 0 || r >= L.rowsIdx.length) return null;
    const cols = Math.min(L.nOps, Math.floor(L.plotW)), perCol = L.nOps / Math.max(1, cols), cw = L.plotW / Math.max(1, cols);
    const px = Math.floor((x - L.left) / cw);
    if (px >= cols) return null;
    const k = L.rowsIdx[r], cells = H.cells[k];
    const a = Math.floor(px * perCol), b = Math.max(a + 1, Math.floor((px + 1) * perCol));
    let op = a;
    for (let j = a; j < b; j++) if (cells[j] > cells[op]) op = j;
    return { k, op, v: cells[op] };
  }

  function heatHover(e) {
    const hit = heatCell(e);
    if (!hit) { hideTip(); return; }
    const c = S.meta.compares[hit.k];
    showTip(e, [el('div', { class: 'tip-name', text: S.heat.names[hit.op] }),
      el('div', { text: where(c) }),
      el('div', { text: `worst output error: ${hit.v < 0 ? 'no data' : fmtNum(hit.v)}` }),
      el('div', { class: 'muted', text: 'click to open its rows' })]);
  }

  function heatClick(e) {
    const hit = heatCell(e);
    if (!hit) return;
    const c = S.meta.compares[hit.k], H = S.heat;
    for (let i = c.start; i < c.end; i++) {
      if (H.col[H.opOf[i]] === hit.op) { jumpTo(c, S.cols.out_seq.arr[i]); return; }
    }
    selectCompare(hit.k);
  }

  function drawTrend() {
    const H = S.heat, cs = S.meta.compares;
    const byStep = H.steps.length > 1;
    const keys = byStep ? H.steps : [...new Set(cs.map((c) => c.rank))].sort((a, b) => (a ?? -1) - (b ?? -1));
    byId('trend-title').textContent = byStep ? 'Step trend of the worst ops (worst over ranks)' : 'The worst ops across ranks (one step)';
    const worst = new Float64Array(H.names.length).fill(-1);
    for (const cells of H.cells) for (let k = 0; k < cells.length; k++) if (cells[k] > worst[k]) worst[k] = cells[k];
    const top = [...worst.keys()].filter((k) => worst[k] > 0).sort((a, b) => worst[b] - worst[a] || a - b).slice(0, 5);
    const host = byId('trend');
    if (!top.length) { host.replaceChildren(el('p', { class: 'muted', text: 'no op has an error above 0' })); return; }
    let lo = Infinity, hi = 0;
    const series = top.map((op) => keys.map((key) => {
      let v = -1;
      cs.forEach((c, k) => { if ((byStep ? c.step : c.rank) === key && H.cells[k][op] > v) v = H.cells[k][op]; });
      if (v > 0 && Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
      return v;
    }));
    if (lo === Infinity) { lo = 1; hi = 1; }
    const lanes = { zero: 10 ** (Math.floor(Math.log10(lo)) - 1), bad: 10 ** (Math.ceil(Math.log10(hi)) + 1) };
    lanes.none = lanes.zero / 10;
    const colors = ['#d7263d', '#3a6ea5', '#2a9d8f', '#e76f51', '#6f42c1'];
    const data = [keys.map((k, j) => j), ...series.map((s) => s.map((v) => (v < 0 ? null : v === 0 ? lanes.zero : Number.isFinite(v) ? v : lanes.bad)))];
    if (S.trend) S.trend.destroy();
    host.replaceChildren();
    S.trend = new uPlot({
      width: Math.max(320, host.clientWidth), height: 220, legend: { show: false },
      cursor: { points: { show: false }, drag: { x: false, y: false } },
      scales: { x: { time: false, range: [-0.3, keys.length - 0.7] }, y: { distr: 3, range: [lanes.none / 2.5, lanes.bad * 2.5] } },
      axes: [{ label: byStep ? 'step' : 'rank', splits: () => keys.map((k, j) => j), values: (u, sp) => sp.map((j) => String(keys[j] ?? '—')), grid: { stroke: '#eef0f3' } },
        { size: 70, splits: () => ySplits(lanes), filter: (u, splits) => splits, values: (u, sp) => sp.map((v) => laneLabel(v, lanes)), grid: { stroke: '#eef0f3' } }],
      series: [{}, ...top.map((op, k) => ({ label: H.names[op], stroke: colors[k], width: 2, points: { show: true, size: 7, fill: colors[k] } }))],
    }, data, host);
    host.append(el('div', { class: 'trend-legend' }, ...top.map((op, k) => el('span', null, el('span', { class: 'dot', style: `background:${colors[k]}` }), H.names[op], el('span', { class: 'muted', text: ` (worst ${fmtNum(worst[op])})` })))));
  }

  // ------------------------------------------------------------------------------ start
  async function main() {
    try {
      const { meta, cols } = await loadPayload();
      S.meta = meta; S.cols = cols;
      const firstDiv = meta.divergence.length ? meta.compares.findIndex((c) => c.compare_id === meta.divergence[0].compare_id) : 0;
      S.sel = 0;
      drawHeader();
      buildCompareSelect();
      buildRun();
      if (S.heat && S.heat.firstDiv) S.sel = S.meta.compares.indexOf(S.heat.firstDiv.c);
      else if (firstDiv > 0) S.sel = firstDiv;
      const sel = byId('compare-select');
      if (sel) sel.value = String(S.sel);
      if (S.heat) drawHeat();
      drawChart();
      drawFindings();
      buildFilters();
      rebuildView();
      const wrap = byId('table-wrap');
      wrap.addEventListener('scroll', () => { if (!S.raf) S.raf = requestAnimationFrame(() => { S.raf = 0; renderRows(); }); });
      const tr = wrap.querySelector('tbody tr:not(.spacer)');
      if (tr && tr.getBoundingClientRect().height > 0) { S.rowHeight = tr.getBoundingClientRect().height; renderRows(); }
      let resizeTimer = 0;
      window.addEventListener('resize', () => { clearTimeout(resizeTimer); resizeTimer = setTimeout(() => { drawChart(); if (S.heat) { drawHeat(); drawTrend(); } }, 200); });
      window.msqReport.ready = true;
      document.body.dataset.ready = 'true';
    } catch (err) {
      const fatal = byId('fatal');
      fatal.hidden = false;
      fatal.textContent = `The report could not be drawn: ${err && err.message ? err.message : err}`;
      throw err;
    }
  }

  window.msqReport = { state: S, ready: false, jumpTo: (ord, outSeq) => jumpTo(S.meta.compares[ord], outSeq), selectCompare: (ord) => selectCompare(ord) };
  main();
})();
