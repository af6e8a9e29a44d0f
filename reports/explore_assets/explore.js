"use strict";
// The explorer page (reports/explore.py embeds this file, the stylesheet and the run's data in one HTML file).
// State lives in the URL hash, so a filtered view or an open direction can be linked and reloaded.
(function () {
  const D = JSON.parse(document.getElementById("data").textContent);
  const N = D.meta.n_directions;
  // Mostly empty columns (a sampled ranker's) come as {i: indices, v: values}: expand them once.
  const dense = (x, n) => {
    if (!x || Array.isArray(x)) return x;
    const a = new Array(n).fill(null);
    x.i.forEach((k, j) => { a[k] = x.v[j]; });
    return a;
  };
  for (const o of Object.values(D.outcomes)) { o.rp = dense(o.rp, N); o.rn = dense(o.rn, N); }
  for (const j of Object.values(D.judgments)) for (const k of Object.keys(j)) j[k] = dense(j[k], N);
  if (D.pool) for (const k of Object.keys(D.pool.text)) D.pool.text[k] = dense(D.pool.text[k], D.pool.pid.length);
  const RANKERS = D.rankers.filter((r) => D.outcomes[r.name]);
  const BY_NAME = Object.fromEntries(D.rankers.map((r) => [r.name, r]));
  const OUTCOME = { 0: ["o0", "·", "not in sample"], 1: ["o1", "✓", "strict success"], 2: ["o2", "✗", "wrong order"],
                    3: ["o3", "=", "tie"] };
  const BRANCH = { e: "equal scores", d: "different scores", o: "outside window / fallback" };
  const BRANCH_TITLE = { e: "both designated passages scored in the window with equal text scores: the tie-breaker decides",
                         d: "both scored in the window with different text scores",
                         o: "a designated passage lies outside the window, or the query fell back to the reference" };
  const PAIR = {};
  D.dirs.pair.forEach((p, i) => { (PAIR[p] = PAIR[p] || []).push(i); });
  const INDEX = Object.fromEntries(D.dirs.qid.map((q, i) => [q, i]));
  const $ = (id) => document.getElementById(id);
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  const fmt = (v, d = 2) => (v === null || v === undefined ? "–" : Number(v).toFixed(d));
  const fmtInt = (v) => (v === null || v === undefined ? "–" : Number(v).toLocaleString("en-US"));
  const fmtSig = (v) => (v === null || v === undefined ? "–" : Math.abs(v) >= 1000 || (Math.abs(v) < 0.001 && v !== 0)
    ? Number(v).toExponential(2) : String(Number(Number(v).toPrecision(4))));
  const fmtP = (p) => (p === null || p === undefined ? "–" : p < 0.0001 ? "<0.0001" : Number(p).toPrecision(2));
  const ci = (v, lo, hi, d) => (v === null || v === undefined ? "–" : fmt(v, d) +
    (lo === null || lo === undefined ? "" : ` <span class="ci">[${fmt(lo, d)}, ${fmt(hi, d)}]</span>`));
  const signed = (v, d) => (v === null || v === undefined ? "–" : (v > 0 ? "+" : "") + fmt(v, d));

  // ---- per-direction values -------------------------------------------------------------------
  const outcome = (name, i) => { const o = D.outcomes[name]; return o ? +o.o[i] : 0; };
  const fallback = (name, i) => { const o = D.outcomes[name]; return !!o && o.f[i] === "1"; };
  const rankPos = (name, i) => { const o = D.outcomes[name]; return o ? o.rp[i] : null; };
  const rankNeg = (name, i) => { const o = D.outcomes[name]; return o ? o.rn[i] : null; };
  const judged = (name, key, i) => { const j = D.judgments[name]; return j && j[key] ? j[key][i] : null; };
  const branch = (name, i) => { const b = D.branches[name]; return b ? b[i] : "-"; };
  const nearTie = (name, i) => judged(name, "tp", i) === 1 || judged(name, "tn", i) === 1;
  const queryText = (i) => D.queries[D.dirs.query[i]] || "";
  const passage = (idx) => D.passages[idx];
  const hasPositions = (name) => !!D.outcomes[name] && D.outcomes[name].rp.some((v) => v !== null);
  const other = (i) => (PAIR[D.dirs.pair[i]] || []).find((j) => j !== i);
  const right = (name, i) => outcome(name, i) === 1;

  // ---- state in the URL hash ------------------------------------------------------------------
  const windowRanker = RANKERS.find((r) => r.window) || RANKERS[0] || { name: "" };
  const DEFAULTS = { view: "overview", r: windowRanker.name, o: "any", br: "", nt: "", a: (RANKERS[0] || {}).name || "",
                     b: windowRanker.name, dis: "", s: "", sort: "", desc: "", page: "0", size: "100", d: "" };
  let S = { ...DEFAULTS };
  function readHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    S = { ...DEFAULTS };
    for (const k of Object.keys(DEFAULTS)) if (p.has(k)) S[k] = p.get(k);
    if (p.has("demo")) demo();
    if (p.has("first")) { const rows = filtered(); if (rows.length) S.d = D.dirs.qid[rows[0]]; }
  }
  function writeHash() {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(S)) if (v !== DEFAULTS[k]) p.set(k, v);
    history.replaceState(null, "", "#" + p.toString());
  }
  function demo() {
    // What a user asks first: where does a window reranker fail although its reference was right?
    const w = RANKERS.find((r) => r.window && r.compare_to && D.outcomes[r.compare_to] && r.compare_to !== r.name);
    if (!w) return;
    Object.assign(S, { view: "directions", r: w.name, a: w.compare_to, b: w.name, dis: "ab" });
  }

  // ---- filtering and sorting ------------------------------------------------------------------
  function keep(i) {
    const c = outcome(S.r, i);
    switch (S.o) {
      case "success": if (c !== 1) return false; break;
      case "failure": if (c !== 2 && c !== 3) return false; break;
      case "wrong": if (c !== 2) return false; break;
      case "tie": if (c !== 3) return false; break;
      case "fallback": if (!fallback(S.r, i)) return false; break;
      case "none": if (c !== 0) return false; break;
      default: break;
    }
    if (S.br && branch(S.r, i) !== "e") return false;
    if (S.nt && !nearTie(S.r, i)) return false;
    if (S.dis) {
      const ca = outcome(S.a, i), cb = outcome(S.b, i);
      if (ca === 0 || cb === 0) return false;
      const ra = rankPos(S.a, i), rb = rankPos(S.b, i);
      switch (S.dis) {
        case "ab": if (!(ca === 1 && cb !== 1)) return false; break;
        case "ba": if (!(cb === 1 && ca !== 1)) return false; break;
        case "either": if ((ca === 1) === (cb === 1)) return false; break;
        case "pos_a": if (ra === null || rb === null || !(ra < rb)) return false; break;
        case "pos_b": if (ra === null || rb === null || !(rb < ra)) return false; break;
        case "pos_either": if (ra === null || rb === null || ra === rb) return false; break;
        default: break;
      }
    }
    if (S.s) {
      const q = S.s.toLowerCase();
      const hay = (queryText(i) + " " + D.dirs.qid[i] + " " + D.dirs.pair[i] + " " + D.dirs.group[i]).toLowerCase();
      if (!hay.includes(q)) return false;
    }
    return true;
  }
  const SORTS = {
    qid: (i) => D.dirs.qid[i], pair: (i) => D.dirs.pair[i], group: (i) => D.dirs.group[i], query: queryText,
    rp: (i) => rankPos(S.r, i), rn: (i) => rankNeg(S.r, i), sp: (i) => judged(S.r, "sp", i),
    sn: (i) => judged(S.r, "sn", i),
    gap: (i) => { const a = judged(S.r, "sp", i), b = judged(S.r, "sn", i); return a === null || b === null ? null : a - b; },
  };
  function filtered() {
    const rows = [];
    for (let i = 0; i < N; i++) if (keep(i)) rows.push(i);
    if (S.sort) {
      const key = S.sort.startsWith("o:") ? ((name) => (i) => outcome(name, i))(S.sort.slice(2)) : SORTS[S.sort];
      if (key) {
        const dir = S.desc ? -1 : 1;
        const keys = new Map(rows.map((i) => [i, key(i)]));
        rows.sort((x, y) => {
          const a = keys.get(x), b = keys.get(y);
          if (a === b) return x - y;
          if (a === null || a === undefined) return 1;   // missing values last, whatever the direction
          if (b === null || b === undefined) return -1;
          return (a < b ? -1 : 1) * dir;
        });
      }
    }
    return rows;
  }

  // ---- header, overview, figures --------------------------------------------------------------
  function header() {
    const m = D.meta;
    $("split").textContent = m.split;
    const ns = D.table2.map((r) => `${esc(r.ranker)} ${fmtInt(r.n)}`).join(" · ");
    const data = m.dataset ? `dataset <code>${esc(m.dataset.name)}</code> <code title="sha256 of its files' digests">` +
      `${esc(String(m.dataset.digest).slice(0, 12))}</code> · ` : "";
    $("meta").innerHTML = `${data}profile <code>${esc(m.profile)}</code> · commit <code>${esc(m.commit)}</code> · run ` +
      `<code>${esc(m.run_id || "–")}</code> · ${fmtInt(N)} planned directions` +
      `<br><span title="directions each ranker is evaluated on">n per ranker: ${ns}</span>`;
  }
  function link(text, state, title) {
    return `<a class="link" data-state='${esc(JSON.stringify(state))}'${title ? ` title="${esc(title)}"` : ""}>${text}</a>`;
  }
  // Table II's columns come with the page (reports.measures.TABLE2, shown in "explorer"): heading, digits, how to
  // write the value, its interval's columns; the row's own baseline ("vs") goes before the first column against it.
  const T2 = D.table2_columns;
  const FIRST_VS = T2.findIndex((c) => c.baseline);
  function t2cell(c, r) {
    const v = r[c.name];
    if (c.format === "int") return fmtInt(v);
    if (c.format === "fixed") return fmt(v, c.digits);
    if (c.format === "interval") return ci(v, r[c.lo], r[c.hi], c.digits);
    return v === null || v === undefined ? "–" : signed(v, c.digits) +
      ` <span class="ci">[${signed(r[c.lo], c.digits)}, ${signed(r[c.hi], c.digits)}]</span>`;
  }
  function overview() {
    const t2 = D.table2;
    let h = "<thead><tr><th>ranker</th>" + T2.map((c, k) => (k === FIRST_VS ? "<th>vs</th>" : "") +
      `<th class="num">${esc(c.label)}</th>`).join("") +
      `<th class="num">fixes / breaks</th><th>directions</th></tr></thead><tbody>`;
    for (const r of t2) {
      const info = BY_NAME[r.ranker] || {};
      const failures = r.n !== null && r.strict !== null ? r.n - r.strict : null;
      const vs = info.compare_to && info.compare_to !== r.ranker ? info.compare_to : "";
      h += `<tr><td class="wrap"><b>${esc(r.ranker)}</b><br><span class="muted small">${esc(info.label && info.label !== r.ranker ? info.label : "")}</span></td>` +
        T2.map((c, k) => (k === FIRST_VS ? `<td>${esc(vs)}</td>` : "") + `<td class="num">${t2cell(c, r)}</td>`).join("") +
        `<td class="num">${vs && r.corrections !== null && r.corrections !== undefined
          ? link(fmtInt(r.corrections), { view: "directions", r: r.ranker, a: r.ranker, b: vs, dis: "ab" }, `${r.ranker} right, ${vs} wrong`) +
            " / " + link(fmtInt(r.regressions), { view: "directions", r: r.ranker, a: r.ranker, b: vs, dis: "ba" }, `${vs} right, ${r.ranker} wrong`) : "–"}</td>
        <td>${D.outcomes[r.ranker] && failures !== null ? link(`${fmtInt(failures)} failures`, { view: "directions", r: r.ranker, o: "failure" }) : ""}</td></tr>`;
    }
    $("table2").innerHTML = h + "</tbody>";
    claims();
    pairwise();
  }
  // Columns the claims table lays out itself; any other numeric column (p-values, MDE, n, directions needed...)
  // is shown as it comes, so new statistics appear without a change here.
  const CLAIM_FIXED = new Set(["claim", "family", "status", "effect", "lo", "hi", "unit", "measured", "reason", "expected",
                               "ranker", "versus", "measure", "profile", "scope", "split", "decision_lo", "decision_hi",
                               "decision_level"]);
  // A claim's decision interval (docs/statistics.md#decision-intervals): the end at 0 on the side its verdict
  // decides is open, so "holds" reads (0, hi] and "fails" [lo, 0); the bootstrap interval beside it only describes.
  const claimDigits = (c) => (c.unit === "pts" || !c.unit ? 2 : 4);
  function decisionText(c) {
    if (c.decision_lo === null || c.decision_lo === undefined || c.decision_hi === null || c.decision_hi === undefined) return "";
    const side = String(c.claimed || "").trim()[0];
    const decided = c.status === "holds" ? side : c.status === "fails" ? (side === ">" ? "<" : ">") : "";
    const d = claimDigits(c);
    return `${decided === ">" ? "(0" : "[" + signed(c.decision_lo, d)}, ${decided === "<" ? "0)" : signed(c.decision_hi, d) + "]"}`;
  }
  function claimLink(c) {
    if (c.ranker && c.versus && D.outcomes[c.ranker] && D.outcomes[c.versus]) {
      // A position measure (MRR, nDCG, ranks) is decided where d⁺ moves; strict preference where the outcome differs.
      const position = !!D.position_measures[c.measure] && hasPositions(c.ranker) && hasPositions(c.versus);
      return link(position ? "directions where d⁺ moves" : "discordant directions",
        { view: "directions", r: c.ranker, a: c.ranker, b: c.versus, dis: position ? "pos_either" : "either" },
        `${c.ranker} vs ${c.versus}: the directions on which they differ decide this claim`);
    }
    if (c.ranker && D.outcomes[c.ranker]) {
      const st = D.branches[c.ranker] ? { br: "1" } : { o: "failure" };
      return link(D.branches[c.ranker] ? "equal-grade directions" : "failures", { view: "directions", r: c.ranker, ...st });
    }
    return '<span class="muted" title="this claims table names no ranker and comparison">–</span>';
  }
  // The claims table at a laptop's width: status first and the claim's name held at the left while the numbers
  // scroll; the decisive numbers (effect, p, n) next, whole counts as integers, the long reason wrapped last.
  const CLAIM_FIRST = ["p_value", "p_adjusted", "n", "n_groups", "differing_groups", "discordant", "mde"];
  const CLAIM_LEAD = CLAIM_FIRST.slice(0, 4);
  const claimNumber = (k, v) => (typeof v !== "number" ? esc(v ?? "–") : k.startsWith("p") ? fmtP(v)
    : Number.isInteger(v) ? fmtInt(v) : fmtSig(v));
  // Where a claim's sequential sample stopped (sequential.csv's stop columns, reports.sequential.StoppingPoint):
  // the look, what it held and spent, why it stopped, and the look that decided the claim.
  function stopCell(s) {
    if (!s) return '<td class="muted">–</td>';
    const held = (g, d, j) => [[g, "group"], [d, "direction"], [j, "judgment"]]
      .map(([n, noun]) => `${fmtInt(n)} ${noun}${n === 1 ? "" : "s"}`).join(" · ");
    return `<td class="wrap seqstop"><b>${esc(s.sample)}</b>: look ${fmtInt(s.look)}, ${held(s.groups, s.directions, s.judgments)}` +
      `<br><span class="muted">${esc(s.reason)}</span>` +
      (s.decided_look ? `<br>decided at look ${fmtInt(s.decided_look)}: ${held(s.decided_groups, s.decided_directions, s.decided_judgments)}`
        : '<br><span class="muted">not decided by any look</span>') + "</td>";
  }
  // The verdicts first: the hypotheses' claims, then the single-seed twins (a "@seed" claim), then gates and pins.
  const claimOrder = (c) => (c.family === "gate" || c.family === "pin" ? 2 : String(c.claim).includes("@") ? 1 : 0);
  function claims() {
    const rows = D.claims.map((c, k) => [claimOrder(c), k, c]).sort((a, b) => a[0] - b[0] || a[1] - b[1]).map((x) => x[2]);
    const sequential = D.sequential || {};
    const stopped = rows.some((c) => sequential[c.claim]);
    if (!rows.length) { $("claims").innerHTML = "<tbody><tr><td class='muted'>no claims in this run</td></tr></tbody>"; return; }
    const numeric = Object.keys(rows[0]).filter((k) => !CLAIM_FIXED.has(k) && rows.some((c) => typeof c[k] === "number"));
    const extra = [...CLAIM_FIRST.filter((k) => numeric.includes(k)), ...numeric.filter((k) => !CLAIM_FIRST.includes(k))];
    // A sequential claim's stopping point goes right after its decisive numbers (p, n, units), on screen at 1,400 px.
    const lead = extra.filter((k) => CLAIM_LEAD.includes(k)), rest = extra.filter((k) => !CLAIM_LEAD.includes(k));
    const compared = rows.some((c) => c.ranker);
    const name = (k) => ({ p_value: "p", p_adjusted: "p (Holm)", p_holm: "p (Holm)", mde: "MDE", n: "n",
                           n_groups: "units", differing_groups: "units differing", p_opposite: "p other side",
                           p_opposite_adjusted: "p other side (Holm)", mde_level: "MDE level",
                           family_hypotheses: "hypotheses" }[k] || k.replace(/_/g, " "));
    let h = `<thead><tr><th class="cstatus">status</th><th class="cname">claim</th>` +
      `<th class="num" title="the decision test inverted at Holm's levels: it agrees with the verdict">effect, decision interval</th>` +
      lead.map((k) => `<th class="num stat">${esc(name(k))}</th>`).join("") +
      (stopped ? "<th>sequential sample stopped at</th>" : "") +
      `<th class="num" title="unadjusted 95% source-group bootstrap interval (a confidence sequence at a sequential stop): it describes the effect and decides nothing">descriptive 95% interval</th>` +
      rest.map((k) => `<th class="num stat">${esc(name(k))}</th>`).join("") +
      `<th>family</th>${compared ? "<th>compares</th>" : ""}<th>decided by</th><th>reason</th></tr></thead><tbody>`;
    for (const c of rows) {
      const unit = c.unit ? ` ${esc(c.unit)}` : "";
      const compares = c.ranker ? `${esc(c.ranker)}${c.versus ? " vs " + esc(c.versus) : ""}${c.measure ? " · " + esc(c.measure) : ""}` : "";
      h += `<tr><td class="cstatus"><span class="status ${esc(c.status)}">${esc(c.status)}</span>${c.expected ? `<br><span class="muted">expected ${esc(c.expected)}</span>` : ""}</td>
        <td class="cname" title="${esc(c.measured || "")}"><b>${esc(c.claim).replace(/[_:]/g, "$&<wbr>")}</b></td>
        <td class="num">${c.effect === null || c.effect === undefined ? "–" : signed(c.effect, claimDigits(c)) + unit +
          (c.seeds ? `, ${esc(c.seeds)}` : "") + (decisionText(c) ? ` <span class="ci">${decisionText(c)}</span>` : "")}</td>` +
        lead.map((k) => `<td class="num">${claimNumber(k, c[k])}</td>`).join("") +
        (stopped ? stopCell(sequential[c.claim]) : "") +
        `<td class="num ci">${c.lo === null || c.lo === undefined ? "–" : `[${signed(c.lo, claimDigits(c))}, ${signed(c.hi, claimDigits(c))}]`}</td>` +
        rest.map((k) => `<td class="num">${claimNumber(k, c[k])}</td>`).join("") +
        `<td>${esc(c.family || "")}</td>${compared ? `<td>${compares}</td>` : ""}<td>${claimLink(c)}</td>` +
        `<td class="wrap muted"><div class="clamp" title="${esc(c.reason || "")}">${esc(c.reason || "")}</div></td></tr>`;
    }
    $("claims").innerHTML = h + "</tbody>";
  }
  function pairwise() {
    const rows = D.pairwise.filter((p) => D.outcomes[p.first] && D.outcomes[p.second]);
    if (!rows.length) { $("pairwise").innerHTML = "<tbody><tr><td class='muted'>no paired comparisons in this run</td></tr></tbody>"; return; }
    let h = `<thead><tr><th>first</th><th>second</th><th class="num">n</th><th class="num">first right, second wrong</th>
      <th class="num">second right, first wrong</th><th class="num">Δ strict (pts)</th><th class="num">p (Holm)</th>
      <th class="num">Δ MRR</th><th class="num">p (Holm)</th></tr></thead><tbody>`;
    for (const p of rows) {
      let ab = 0, ba = 0;
      for (let i = 0; i < N; i++) {
        const a = outcome(p.first, i), b = outcome(p.second, i);
        if (a === 0 || b === 0) continue;
        if (a === 1 && b !== 1) ab++; else if (b === 1 && a !== 1) ba++;
      }
      h += `<tr><td>${esc(p.first)}</td><td>${esc(p.second)}</td><td class="num">${fmtInt(p.n)}</td>
        <td class="num">${link(fmtInt(ab), { view: "directions", r: p.first, a: p.first, b: p.second, dis: "ab" })}</td>
        <td class="num">${link(fmtInt(ba), { view: "directions", r: p.second, a: p.first, b: p.second, dis: "ba" })}</td>
        <td class="num">${signed(p.delta_pts, 2)} <span class="ci">[${signed(p.delta_lo, 2)}, ${signed(p.delta_hi, 2)}]</span></td>
        <td class="num">${fmtP(p.p_strict_holm)}</td><td class="num">${p.delta_mrr === null || p.delta_mrr === undefined ? "–" : signed(p.delta_mrr, 4)}</td>
        <td class="num">${fmtP(p.p_mrr_holm)}</td></tr>`;
    }
    $("pairwise").innerHTML = h + "</tbody>";
  }
  function figures() {
    const titles = { figure1: "Figure 1: strict preference vs preferred-passage MRR, and where the designated passages land",
                     figure2: "Figure 2: the equal-grade branch's share of directions vs of non-successes" };
    $("figures").innerHTML = D.figures.length ? D.figures.map((f) => `<div class="figure"><h2>${esc(titles[f.name] || f.name)}</h2>
      <img alt="${esc(titles[f.name] || f.name)}" src="${f.src}"></div>`).join("") : "<p class='muted'>no figures in this run</p>";
  }

  // ---- the directions table -------------------------------------------------------------------
  function options() {
    const opts = (sel) => RANKERS.map((r) => `<option value="${esc(r.name)}"${r.name === sel ? " selected" : ""}>${esc(r.name)}${r.label && r.label !== r.name ? " — " + esc(r.label) : ""}</option>`).join("");
    $("f-ranker").innerHTML = opts(S.r);
    $("f-a").innerHTML = opts(S.a);
    $("f-b").innerHTML = opts(S.b);
    $("f-outcome").value = S.o;
    $("f-branch").checked = !!S.br;
    $("f-branch").disabled = !D.branches[S.r];
    $("f-neartie").checked = !!S.nt;
    $("f-neartie").disabled = !(D.judgments[S.r] && D.judgments[S.r].tp);
    $("f-dis").value = S.dis;
    $("f-search").value = S.s;
  }
  function outcomeCell(name, i) {
    const c = outcome(name, i), [cls, glyph, what] = OUTCOME[c];
    const fb = fallback(name, i);
    return `<td class="o ${cls}${name === S.r ? " focuscol" : ""}" title="${esc(name)}: ${what}${fb ? ", fell back to the reference" : ""}"><span class="${fb ? "fb" : ""}">${glyph}</span></td>`;
  }
  function table() {
    const rows = filtered();
    const size = S.size === "all" ? rows.length || 1 : +S.size;
    const pages = Math.max(1, Math.ceil(rows.length / size));
    const page = Math.min(Math.max(0, +S.page || 0), pages - 1);
    const positions = hasPositions(S.r), scores = !!D.judgments[S.r];
    const sortable = (key, label, cls = "") => `<th class="sortable ${cls}${S.sort === key ? " sorted" + (S.desc ? " desc" : "") : ""}" data-sort="${esc(key)}">${label}</th>`;
    let h = "<tr>" + sortable("qid", "qid") + sortable("pair", "pair") + "<th>dir</th>" + sortable("group", "source group") +
      sortable("query", "query") +
      RANKERS.map((r) => sortable("o:" + r.name, `<span title="${esc(r.label || r.name)}">${esc(r.name)}</span>`, "rk" + (r.name === S.r ? " focus" : ""))).join("") +
      (positions ? sortable("rp", `d⁺ pos<br><small>${esc(S.r)}</small>`, "num") + sortable("rn", `d⁻ pos<br><small>${esc(S.r)}</small>`, "num") : "") +
      (scores ? sortable("sp", `d⁺ score<br><small>${esc(S.r)}</small>`, "num") + sortable("sn", `d⁻ score<br><small>${esc(S.r)}</small>`, "num") +
        sortable("gap", "gap", "num") : "") + "</tr>";
    $("dirs").tHead.innerHTML = h;
    const body = [];
    for (const i of rows.slice(page * size, page * size + size)) {
      const sp = judged(S.r, "sp", i), sn = judged(S.r, "sn", i);
      body.push(`<tr data-i="${i}" data-qid="${esc(D.dirs.qid[i])}"><td>${esc(D.dirs.qid[i])}</td><td>${esc(D.dirs.pair[i])}</td>
        <td>${esc(D.dirs.dir[i])}</td><td>${esc(D.dirs.group[i])}</td>
        <td class="q">${esc(queryText(i))}${D.dirs.eligible[i] ? "" : ` <span class="tag">${D.dirs.conflict[i] ? "conflict" : "not covered"}</span>`}</td>` +
        RANKERS.map((r) => outcomeCell(r.name, i)).join("") +
        (positions ? `<td class="num">${fmtInt(rankPos(S.r, i))}</td><td class="num">${fmtInt(rankNeg(S.r, i))}</td>` : "") +
        (scores ? `<td class="num">${fmtSig(sp)}</td><td class="num">${fmtSig(sn)}</td><td class="num">${sp === null || sn === null ? "–" : fmtSig(sp - sn)}</td>` : "") +
        "</tr>");
    }
    $("dirs").tBodies[0].innerHTML = body.join("") ||
      `<tr><td colspan="${5 + RANKERS.length}" class="muted">no direction matches these filters</td></tr>`;
    $("count").textContent = `${fmtInt(rows.length)} of ${fmtInt(N)} directions`;
    $("count").dataset.count = String(rows.length);
    $("pager").innerHTML = `<button type="button" data-page="${page - 1}"${page === 0 ? " disabled" : ""}>‹ prev</button>
      <span>page ${page + 1} of ${pages}</span><button type="button" data-page="${page + 1}"${page >= pages - 1 ? " disabled" : ""}>next ›</button>
      <select id="f-size">${["25", "100", "500", "all"].map((v) => `<option${v === S.size ? " selected" : ""}>${v}</option>`).join("")}</select> per page`;
    return rows;
  }

  // ---- the direction view ---------------------------------------------------------------------
  function words(text) { return text.match(/\S+|\s+/g) || []; }
  const norm = (w) => w.toLowerCase().replace(/^[^\w]+|[^\w]+$/g, "");
  // Word-level diff (longest common subsequence of words): the words of each text that the other lacks are marked.
  function diff(a, b) {
    const ta = words(a), tb = words(b);
    const wa = [], wb = [];
    ta.forEach((t, k) => { if (/\S/.test(t)) wa.push(k); });
    tb.forEach((t, k) => { if (/\S/.test(t)) wb.push(k); });
    const n = wa.length, m = wb.length;
    const L = new Uint16Array((n + 1) * (m + 1));
    for (let x = n - 1; x >= 0; x--) for (let y = m - 1; y >= 0; y--) {
      L[x * (m + 1) + y] = norm(ta[wa[x]]) === norm(tb[wb[y]]) ? L[(x + 1) * (m + 1) + y + 1] + 1
        : Math.max(L[(x + 1) * (m + 1) + y], L[x * (m + 1) + y + 1]);
    }
    const sameA = new Set(), sameB = new Set();
    let x = 0, y = 0;
    while (x < n && y < m) {
      if (norm(ta[wa[x]]) === norm(tb[wb[y]])) { sameA.add(wa[x]); sameB.add(wb[y]); x++; y++; }
      else if (L[(x + 1) * (m + 1) + y] >= L[x * (m + 1) + y + 1]) x++; else y++;
    }
    const paint = (tokens, same) => tokens.map((t, k) => (/\S/.test(t) && !same.has(k) ? `<mark>${esc(t)}</mark>` : esc(t))).join("");
    return [paint(ta, sameA), paint(tb, sameB)];
  }
  function probs(p) {
    if (!p) return "–";
    const top = p.indexOf(Math.max(...p));
    return `<span class="probs" title="${p.map((v, g) => `p(${g}) = ${v}`).join(", ")}">` +
      p.map((v, g) => `<span class="${g === top ? "top" : ""}" style="height:${Math.max(1, Math.round(22 * v))}px"></span>`).join("") +
      `</span><span class="probs-label">${top}: ${fmt(p[top], 2)}</span>`;
  }
  function outcomeText(name, i) {
    const c = outcome(name, i), [cls, glyph, what] = OUTCOME[c];
    return `<span class="${cls}">${glyph} ${what}</span>${fallback(name, i) ? ' <span class="tag warn">fallback</span>' : ""}`;
  }
  function direction(i, rows) {
    const j = other(i);
    const [pos, neg] = diff(passage(D.dirs.pos[i]) || "", passage(D.dirs.neg[i]) || "");
    const query = j === undefined ? esc(queryText(i)) : diff(queryText(i), queryText(j))[0];
    const at = rows.indexOf(i);
    const nav = (k, label) => (k >= 0 && k < rows.length ? `<button type="button" data-open="${rows[k]}">${label}</button>` : `<button type="button" disabled>${label}</button>`);
    let h = `<div class="head"><h2>${esc(D.dirs.qid[i])}</h2><span class="muted">pair ${esc(D.dirs.pair[i])} · direction ${esc(D.dirs.dir[i])} ·
      source group ${esc(D.dirs.group[i])}${D.dirs.eligible[i] ? "" : ` · <span class="tag warn">not eligible: ${D.dirs.conflict[i] ? "structural conflict" : "a designated passage is not in the pool"}</span>`}</span>
      <span class="spacer"></span>${j === undefined ? "" : `<a class="link" id="other-direction" data-open="${j}">other direction of this pair: ${esc(D.dirs.qid[j])} →</a>`}
      ${at >= 0 ? nav(at - 1, "‹ previous") + `<span class="muted">${at + 1} of ${rows.length}</span>` + nav(at + 1, "next ›") : ""}
      <button type="button" id="close">close ✕</button></div>
      <div class="query" id="query">${query}</div>
      <p class="note">Highlighted: words that differ from ${j === undefined ? "the other passage" : "the other direction's query (above) and between the two passages (below)"}.</p>
      <div class="passages"><div class="passage pos" id="passage-pos"><h3>d⁺ preferred passage <span class="muted">${esc(D.pids[D.dirs.pos[i]])}</span></h3>${pos}</div>
      <div class="passage neg" id="passage-neg"><h3>d⁻ counterpart <span class="muted">${esc(D.pids[D.dirs.neg[i]])}</span></h3>${neg}</div></div>`;
    const graded = RANKERS.some((r) => judged(r.name, "gp", i) || judged(r.name, "gn", i));
    h += `<h3>Each ranker on this direction${j === undefined ? "" : ` <small>and on the other direction (${esc(D.dirs.qid[j])}): paired = both right</small>`}</h3>
      <div class="scroll"><table class="grid" id="rankers-here"><thead><tr><th>ranker</th><th>this direction</th>${j === undefined ? "" : "<th>other direction</th><th>paired</th>"}
      <th class="num">d⁺ pos</th><th class="num">d⁻ pos</th><th class="num">d⁺ score</th><th class="num">d⁻ score</th>
      ${graded ? "<th>d⁺ grade p(0–4)</th><th>d⁻ grade p(0–4)</th><th class='num'>margin d⁺ / d⁻</th>" : ""}<th>branch</th></tr></thead><tbody>`;
    for (const r of RANKERS) {
      const n = r.name, nt = [judged(n, "tp", i), judged(n, "tn", i)];
      const err = [judged(n, "ep", i), judged(n, "en", i)].filter(Boolean);
      h += `<tr><td class="wrap"><b>${esc(n)}</b>${r.label && r.label !== n ? `<br><span class="muted small">${esc(r.label)}</span>` : ""}</td><td>${outcomeText(n, i)}</td>` +
        (j === undefined ? "" : `<td>${outcomeText(n, j)}</td><td>${outcome(n, i) && outcome(n, j) ? (right(n, i) && right(n, j) ? '<span class="o1">both right</span>' : '<span class="muted">no</span>') : "–"}</td>`) +
        `<td class="num">${fmtInt(rankPos(n, i))}</td><td class="num">${fmtInt(rankNeg(n, i))}</td>
        <td class="num">${fmtSig(judged(n, "sp", i))}</td><td class="num">${fmtSig(judged(n, "sn", i))}${err.length ? ` <span class="tag warn" title="${esc(err.join("; "))}">unavailable</span>` : ""}</td>` +
        (graded ? `<td>${probs(judged(n, "gp", i))}</td><td>${probs(judged(n, "gn", i))}</td>
          <td class="num">${judged(n, "mp", i) === null && judged(n, "mn", i) === null ? "–" : `${fmt(judged(n, "mp", i), 3)} / ${fmt(judged(n, "mn", i), 3)}`}${nt.includes(1) ? ' <span class="tag warn">near-tie</span>' : ""}</td>` : "") +
        `<td class="br"${branch(n, i) === "-" ? "" : ` title="${esc(BRANCH_TITLE[branch(n, i)])}"`}>${branch(n, i) === "-" ? "–" : esc(BRANCH[branch(n, i)])}</td></tr>`;
    }
    h += "</tbody></table></div>" + pool(i);
    $("direction").innerHTML = h;
  }
  function pool(i) {
    const P = D.pool;
    if (!P) return "<p class='muted'>no pool order in this run</p>";
    const s = P.start[i], e = P.start[i + 1];
    const ref = D.meta.reference;
    const texts = Object.keys(P.text).filter((t) => P.text[t].slice(s, e).some((v) => v !== null));  // who scored this window
    const rp = rankPos(ref, i), rn = rankNeg(ref, i);
    const outside = [[rp, "d⁺"], [rn, "d⁻"]].filter(([r]) => r !== null && r > D.meta.pool_top)
      .map(([r, what]) => `${what} at ${esc(ref)} rank ${fmtInt(r)}`);
    let h = `<h3>Top ${e - s} of the pool by ${esc(ref)} <small>the window the rerankers see; route scores (rank)${outside.length ? "; outside it: " + outside.join(", ") : ""}</small></h3>
      <div class="scroll"><table class="grid" id="pool"><thead><tr><th class="num">#</th><th>pid</th>` +
      P.routes.map((r) => `<th class="num">${esc(r)}</th>`).join("") + texts.map((t) => `<th class="num">${esc(t)}</th>`).join("") +
      "<th>passage</th></tr></thead><tbody>";
    for (let k = s; k < e; k++) {
      const p = P.pid[k];
      const role = p === D.dirs.pos[i] ? "pos" : p === D.dirs.neg[i] ? "neg" : "";
      const text = passage(p) || "";
      h += `<tr class="${role ? "designated-" + role : ""}"><td class="num">${k - s + 1}</td><td>${esc(D.pids[p])}${role ? ` <span class="tag ${role}">${role === "pos" ? "d⁺" : "d⁻"}</span>` : ""}</td>` +
        P.routes.map((r) => `<td class="num">${P[r + "_score"][k] === null ? "–" : `${fmtSig(P[r + "_score"][k])} <span class="ci">(${fmtInt(P[r + "_rank"][k])})</span>`}</td>`).join("") +
        texts.map((t) => `<td class="num">${fmtSig(P.text[t][k])}</td>`).join("") +
        `<td class="snippet">${text.length > 160 ? `<details title="click to show the whole passage"><summary>${esc(text.slice(0, 160))}…</summary>${esc(text.slice(160))}</details>` : esc(text)}</td></tr>`;
    }
    return h + "</tbody></table></div>";
  }

  // ---- wiring ---------------------------------------------------------------------------------
  let current = [];
  function render() {
    document.querySelectorAll("#tabs button").forEach((b) => b.classList.toggle("active", b.dataset.view === S.view));
    document.querySelectorAll(".view").forEach((v) => v.classList.toggle("active", v.id === S.view));
    options();
    current = S.view === "directions" || S.d ? table() : current;
    const open = S.d && INDEX[S.d] !== undefined;
    $("direction").hidden = !open;
    $("shade").hidden = !open;
    if (open) direction(INDEX[S.d], current);
    writeHash();
  }
  function update(change, resetPage = true) {
    Object.assign(S, change);
    if (resetPage && !("page" in change)) S.page = "0";
    render();
  }
  document.addEventListener("click", (ev) => {
    const t = ev.target.closest("[data-state],[data-view],[data-sort],[data-page],[data-open],tr[data-i],#close,#shade");
    if (!t) return;
    if (t.dataset.state) {
      update({ ...DEFAULTS, ...JSON.parse(t.dataset.state) });
      window.scrollTo(0, 0);
    } else if (t.dataset.view) update({ view: t.dataset.view, d: "" }, false);
    else if (t.dataset.sort) update(S.sort === t.dataset.sort ? { desc: S.desc ? "" : "1" } : { sort: t.dataset.sort, desc: "" });
    else if (t.dataset.page !== undefined) update({ page: t.dataset.page });
    else if (t.dataset.open !== undefined) { update({ d: D.dirs.qid[+t.dataset.open] }, false); $("direction").scrollTop = 0; }
    else if (t.dataset.i !== undefined) update({ d: D.dirs.qid[+t.dataset.i] }, false);
    else update({ d: "" }, false);
  });
  $("filters").addEventListener("change", (ev) => {
    const id = ev.target.id;
    const map = { "f-ranker": "r", "f-outcome": "o", "f-a": "a", "f-b": "b", "f-dis": "dis" };
    if (map[id]) update({ [map[id]]: ev.target.value });
    else if (id === "f-branch") update({ br: ev.target.checked ? "1" : "" });
    else if (id === "f-neartie") update({ nt: ev.target.checked ? "1" : "" });
  });
  $("f-search").addEventListener("input", (ev) => update({ s: ev.target.value }));
  $("f-reset").addEventListener("click", () => update({ ...DEFAULTS, view: "directions" }));
  $("pager").addEventListener("change", (ev) => { if (ev.target.id === "f-size") update({ size: ev.target.value }); });
  document.addEventListener("keydown", (ev) => {
    if (!S.d || ev.target.tagName === "INPUT" || ev.target.tagName === "SELECT") return;
    const at = current.indexOf(INDEX[S.d]);
    if (ev.key === "Escape") update({ d: "" }, false);
    else if (ev.key === "ArrowRight" && at >= 0 && at + 1 < current.length) update({ d: D.dirs.qid[current[at + 1]] }, false);
    else if (ev.key === "ArrowLeft" && at > 0) update({ d: D.dirs.qid[current[at - 1]] }, false);
  });
  window.addEventListener("hashchange", () => { readHash(); render(); });

  header();
  overview();
  figures();
  readHash();
  render();
  document.body.dataset.ready = "1";
  window.exploreReadyMs = performance.now();
})();
