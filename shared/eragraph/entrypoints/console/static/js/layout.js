// Where the summary graph draws its nodes: one row per layer (the top layer first), each node
// above or below its relatives. The bands hold pages of their layers in code order, and a
// layer's page covers far fewer segments than the page of the layer above it (150 chunks are the
// members of some 15 summaries), so spreading each band evenly over one width would fan the
// edges out. Instead each drawn tree is laid out depth first: a node whose members are not drawn
// takes the next free place of its row, a summary whose members are drawn sits over their middle,
// and every row packs its nodes at least ``slot`` apart. A node whose parent is not drawn starts a
// tree of its own, after those of the rows above.

export function bandLayout(bands, { slot = 18, band = 170 } = {}) {
  const rows = new Map(); // layer -> row (0: the top layer)
  bands.forEach((b, row) => rows.set(b.layer, row));
  const nodes = new Map();
  for (const b of bands) for (const n of b.nodes) nodes.set(n.id, n);
  const children = new Map();
  const roots = [];
  for (const b of bands) {
    for (const n of b.nodes) {
      if (n.parent && nodes.has(n.parent) && nodes.get(n.parent).layer > n.layer) {
        if (!children.has(n.parent)) children.set(n.parent, []);
        children.get(n.parent).push(n.id);
      } else {
        roots.push(n.id);
      }
    }
  }
  const free = new Array(bands.length).fill(0); // the next free x of each row
  const at = new Map();

  function place(id, earliest) {
    const row = rows.get(nodes.get(id).layer);
    const kids = children.get(id) || [];
    let x;
    if (kids.length) {
      // start the members so that their middle is no left of this row's next free place
      const start = Math.max(earliest, free[row] - ((kids.length - 1) * slot) / 2);
      const xs = kids.map((kid, i) => place(kid, start + i * slot));
      x = Math.max((xs[0] + xs[xs.length - 1]) / 2, free[row]);
    } else {
      x = Math.max(earliest, free[row]);
    }
    free[row] = x + slot;
    at.set(id, { x, y: row * band });
    return x;
  }

  for (const id of roots) if (!at.has(id)) place(id, 0);
  return at;
}
