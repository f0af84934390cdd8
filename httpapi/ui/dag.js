// The dashboard's DAG drawing: a layered layout (after Sugiyama et al.) in
// plain JavaScript. Edges never pass under a node box: an edge that spans
// several columns goes through a slot of its own in each column between
// (a virtual node), and between two columns it stays in the gap between
// them, where there are no boxes.
"use strict";

// The geometry of a drawing, in SVG user units.
const DAG = {
  W: 160, // a box's width
  H: 44, // a box's height
  GX: 72, // the gap between two columns, where edges bend
  GY: 20, // the least gap between two boxes of a column
  LANE: 8, // the height of an edge's slot in a column it crosses
  LGAP: 6, // the least gap between a slot and its neighbours
  PAD: 16, // the margin around the drawing
  PORT: 12, // the least gap between two edge ends on a box's side: an arrowhead's height
  EDGE: 8, // the least gap between an edge end and a box's corner
};

// dagLayout lays out steps ({name, kind, parents}) and returns the boxes by
// step name ({x, y, w, h, layer}), the edges ({from, to, d}: d is an SVG
// path from the right side of the parent's box to the left side of the
// child's), and the drawing's width and height. A box is H high, or more
// when more edges enter or leave it than fit on its side PORT apart: the
// ends of the edges that enter a box spread along its side, so that their
// arrowheads stay apart.
function dagLayout(steps) {
  const { W, H, GX, GY, LANE, LGAP, PAD, PORT, EDGE } = DAG;
  const index = new Map(steps.map((s, i) => [s.name, i]));
  const n = steps.length;
  const onFailure = (i) => steps[i].kind === "on_failure";

  // The edges, parent to child, between steps that are drawn.
  const parentsOf = steps.map((s, i) => [...new Set(s.parents || [])]
    .map((p) => index.get(p)).filter((p) => p !== undefined && p !== i && !onFailure(p)));
  const childrenOf = steps.map(() => []);
  parentsOf.forEach((ps, i) => { for (const p of ps) childrenOf[p].push(i); });

  // 1. Layers. A step goes one column after its furthest parent (the
  // longest path from a root); a step that has more children than parents
  // then moves right, next to its nearest child, which shortens its edges.
  // The on-failure handler has the last column to itself.
  const layer = new Array(n).fill(-1);
  const order = []; // a topological order
  const state = new Array(n).fill(0); // 0 new, 1 on the stack, 2 done
  const visit = (i) => {
    if (state[i] === 2) return;
    if (state[i] === 1) return; // a cycle: never in a valid DAG, cut here
    state[i] = 1;
    let d = 0;
    for (const p of parentsOf[i]) {
      visit(p);
      d = Math.max(d, layer[p] + 1);
    }
    layer[i] = d;
    state[i] = 2;
    order.push(i);
  };
  for (let i = 0; i < n; i++) if (!onFailure(i)) visit(i);
  // Edges that do not go forward (only in a cycle) are not drawn.
  for (let i = 0; i < n; i++) parentsOf[i] = parentsOf[i].filter((p) => layer[p] < layer[i]);
  for (let i = 0; i < n; i++) childrenOf[i] = childrenOf[i].filter((c) => layer[i] < layer[c]);
  for (let k = order.length - 1; k >= 0; k--) {
    const i = order[k];
    if (childrenOf[i].length <= parentsOf[i].length) continue;
    const nearest = Math.min(...childrenOf[i].map((c) => layer[c])) - 1;
    if (nearest > layer[i]) layer[i] = nearest;
  }
  let last = -1;
  for (let i = 0; i < n; i++) if (!onFailure(i)) last = Math.max(last, layer[i]);
  for (let i = 0; i < n; i++) if (onFailure(i)) layer[i] = last + 1;
  const layers = Math.max(...layer, -1) + 1;

  // 2. Virtual nodes: an edge that spans k columns gets a node in each of
  // the k-1 columns between, so that every link joins adjacent columns.
  // Nodes 0..n-1 are the steps; the rest are virtual.
  const nodeLayer = [...layer];
  const up = steps.map(() => []);
  const down = steps.map(() => []);
  const link = (a, b) => { down[a].push(b); up[b].push(a); };
  const edges = [];
  for (let i = 0; i < n; i++) {
    for (const p of parentsOf[i]) {
      const chain = [p];
      for (let l = layer[p] + 1; l < layer[i]; l++) {
        const v = nodeLayer.length;
        nodeLayer.push(l);
        up.push([]);
        down.push([]);
        chain.push(v);
      }
      chain.push(i);
      for (let k = 1; k < chain.length; k++) link(chain[k - 1], chain[k]);
      edges.push({ from: steps[p].name, to: steps[i].name, chain });
    }
  }
  const real = (v) => v < n;
  const count = nodeLayer.length;
  // A box's height: room for its edges' ends on either side, PORT apart.
  const boxH = steps.map((_, i) => Math.max(H, 2 * EDGE + PORT * (Math.max(up[i].length, down[i].length) - 1)));

  // 3. The order within each column: a depth-first order to start with,
  // then barycenter sweeps (a node goes to the mean position of its
  // neighbours in the column before, or after) and swaps of neighbours, the
  // order with the fewest crossings kept.
  const rank = Array.from({ length: layers }, () => []);
  const seen = new Array(count).fill(false);
  const place = (v) => {
    if (seen[v]) return;
    seen[v] = true;
    rank[nodeLayer[v]].push(v);
    for (const w of down[v]) place(w);
  };
  for (let i = 0; i < n; i++) if (up[i].length === 0) place(i);
  for (let v = 0; v < count; v++) place(v);
  const pos = new Array(count).fill(0);
  const renumber = (l) => rank[l].forEach((v, k) => { pos[v] = k; });
  rank.forEach((_, l) => renumber(l));

  // crossings counts the crossings of the links between columns l and l+1.
  const crossings = (l) => {
    const links = [];
    for (const v of rank[l]) for (const w of down[v]) links.push([pos[v], pos[w]]);
    let c = 0;
    for (let a = 0; a < links.length; a++) {
      for (let b = a + 1; b < links.length; b++) {
        const [a1, a2] = links[a], [b1, b2] = links[b];
        if ((a1 - b1) * (a2 - b2) < 0) c++;
      }
    }
    return c;
  };
  const total = () => {
    let c = 0;
    for (let l = 0; l + 1 < layers; l++) c += crossings(l);
    return c;
  };
  const sortBy = (l, nbrs) => {
    const key = new Map(rank[l].map((v) => {
      const ns = nbrs[v];
      return [v, ns.length ? ns.reduce((s, w) => s + pos[w], 0) / ns.length : pos[v]];
    }));
    rank[l].sort((a, b) => key.get(a) - key.get(b) || pos[a] - pos[b]);
    renumber(l);
  };
  // pair counts the crossings between the links of v and of w (v above w)
  // to the columns on either side.
  const pair = (v, w) => {
    let c = 0;
    for (const nbrs of [up, down]) {
      for (const a of nbrs[v]) for (const b of nbrs[w]) if (pos[a] > pos[b]) c++;
    }
    return c;
  };
  const transpose = () => {
    for (let pass = 0, better = true; better && pass < 8; pass++) {
      better = false;
      for (const r of rank) {
        for (let k = 0; k + 1 < r.length; k++) {
          const v = r[k], w = r[k + 1];
          if (pair(w, v) < pair(v, w)) {
            r[k] = w; r[k + 1] = v;
            pos[w] = k; pos[v] = k + 1;
            better = true;
          }
        }
      }
    }
  };
  let best = rank.map((r) => [...r]);
  let fewest = total();
  for (let it = 0; it < 24 && fewest > 0; it++) {
    if (it % 2 === 0) for (let l = 1; l < layers; l++) sortBy(l, up);
    else for (let l = layers - 2; l >= 0; l--) sortBy(l, down);
    transpose();
    const c = total();
    if (c < fewest) {
      fewest = c;
      best = rank.map((r) => [...r]);
    }
  }
  best.forEach((r, l) => { rank[l] = r; renumber(l); });

  // 4. Vertical positions: each column in its order, with its gaps, as near
  // as can be to the mean of each node's neighbours (a least-squares fit
  // under the order and gap constraints, by pooling adjacent violators).
  // Steps weigh more than virtual nodes, so edges make way for boxes.
  const size = (v) => (real(v) ? boxH[v] : LANE);
  const gap = (a, b) => size(a) / 2 + size(b) / 2 + (real(a) && real(b) ? GY : LGAP);
  const y = new Array(count).fill(0); // centres
  for (const r of rank) r.forEach((v, k) => { y[v] = k === 0 ? 0 : y[r[k - 1]] + gap(r[k - 1], v); });
  const fit = (r, want) => {
    // With offsets o (the least gaps summed), z = y - o must not decrease:
    // an isotonic regression of want - o.
    const o = [0];
    for (let k = 1; k < r.length; k++) o.push(o[k - 1] + gap(r[k - 1], r[k]));
    const blocks = [];
    r.forEach((v, k) => {
      const w = real(v) ? 2 : 1;
      blocks.push({ w, s: w * (want[k] - o[k]), n: 1 });
      while (blocks.length > 1) {
        const b = blocks[blocks.length - 1], a = blocks[blocks.length - 2];
        if (a.s / a.w <= b.s / b.w) break;
        blocks.pop();
        a.w += b.w; a.s += b.s; a.n += b.n;
      }
    });
    let k = 0;
    for (const b of blocks) for (let j = 0; j < b.n; j++, k++) y[r[k]] = b.s / b.w + o[k];
  };
  const align = (l, sides) => {
    const r = rank[l];
    const mean = (ns) => ns.reduce((s, w) => s + y[w], 0) / ns.length;
    const want = r.map((v) => {
      const ns = sides.flatMap((s) => s[v]);
      if (ns.length) return mean(ns);
      const any = [...up[v], ...down[v]];
      return any.length ? mean(any) : null;
    });
    // A step without edges keeps close to the one before it (or after).
    for (let k = 1; k < r.length; k++) if (want[k] === null && want[k - 1] !== null) want[k] = want[k - 1] + gap(r[k - 1], r[k]);
    for (let k = r.length - 2; k >= 0; k--) if (want[k] === null && want[k + 1] !== null) want[k] = want[k + 1] - gap(r[k], r[k + 1]);
    fit(r, want.map((w, k) => (w === null ? y[r[k]] : w)));
  };
  for (let it = 0; it < 8; it++) {
    for (let l = 1; l < layers; l++) align(l, [up]);
    for (let l = layers - 2; l >= 0; l--) align(l, [down]);
  }
  for (let l = 0; l < layers; l++) align(l, [up, down]);
  let top = Infinity, bottom = -Infinity;
  for (let v = 0; v < count; v++) {
    top = Math.min(top, y[v] - size(v) / 2);
    bottom = Math.max(bottom, y[v] + size(v) / 2);
  }
  if (count === 0) top = bottom = 0;
  const shift = PAD - top;
  const colX = (l) => PAD + l * (W + GX);
  const boxes = {};
  for (let i = 0; i < n; i++) {
    boxes[steps[i].name] = { x: colX(layer[i]), y: y[i] + shift - boxH[i] / 2, w: W, h: boxH[i], layer: layer[i] };
  }

  // 5. Edges. Where several edges leave (or enter) a box, they spread over
  // its side in the order of the other ends, so they do not cross there,
  // at least PORT apart (the box is high enough: boxH), so that their
  // arrowheads do not pile up.
  // Between columns an edge is a cubic curve with horizontal ends, its
  // control points in the gap: the curve stays in the gap. Through a
  // column it crosses, it is a straight line in its own slot.
  const cy = (v) => y[v] + shift;
  const ports = (v, links, other) => {
    const sorted = [...links].sort((a, b) => cy(other(a)) - cy(other(b)) || other(a) - other(b));
    const step = sorted.length > 1 ? Math.min(PORT + 2, (boxH[v] - 2 * EDGE) / (sorted.length - 1)) : 0;
    return new Map(sorted.map((e, k) => [e, cy(v) + (k - (sorted.length - 1) / 2) * step]));
  };
  const outs = new Map(), ins = new Map();
  for (let i = 0; i < n; i++) {
    const first = edges.filter((e) => e.chain[0] === i);
    const lastHop = edges.filter((e) => e.chain[e.chain.length - 1] === i);
    for (const [e, py] of ports(i, first, (e) => e.chain[1])) outs.set(e, py);
    for (const [e, py] of ports(i, lastHop, (e) => e.chain[e.chain.length - 2])) ins.set(e, py);
  }
  const r1 = (v) => Math.round(v * 10) / 10;
  const out = edges.map((e) => {
    const c = e.chain;
    let x = colX(nodeLayer[c[0]]) + W, py = outs.get(e);
    let d = `M${r1(x)},${r1(py)}`;
    for (let k = 1; k < c.length; k++) {
      const v = c[k];
      const nx = colX(nodeLayer[v]);
      const ny = k === c.length - 1 ? ins.get(e) : cy(v);
      const mx = (x + nx) / 2;
      d += ` C${r1(mx)},${r1(py)} ${r1(mx)},${r1(ny)} ${r1(nx)},${r1(ny)}`;
      if (k < c.length - 1) d += ` L${r1(nx + W)},${r1(ny)}`; // through its slot
      x = nx + W;
      py = ny;
    }
    return { from: e.from, to: e.to, d };
  });
  return {
    boxes,
    edges: out,
    crossings: fewest,
    width: layers ? colX(layers - 1) + W + PAD : 2 * PAD,
    height: bottom - top + 2 * PAD,
  };
}
