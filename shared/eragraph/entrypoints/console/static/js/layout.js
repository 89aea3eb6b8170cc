// Where the summary graph draws its nodes: one row per layer (the top layer first), each node
// above or below its relatives. The bands hold pages of their layers in code order, and a
// layer's page covers far fewer segments than the page of the layer above it (150 chunks are the
// members of some 15 summaries), so spreading each band evenly over one width would fan the
// edges out. Instead each drawn tree is laid out depth first: a node whose members are not drawn
// takes the next free place of its row, a summary whose members are drawn sits over their middle,
// and every row packs its nodes at least ``slot`` apart. A node whose parent is not drawn starts a
// tree of its own, after those of the rows above. A summary whose members are not drawn is
// folded: folded neighbours pack ``fold`` apart (on a large store most of an upper band is
// folded, and the drawn trees would otherwise lean far to the right of them).

export function bandLayout(bands, { slot = 18, fold = 6, band = 170 } = {}) {
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
  const last = new Array(bands.length).fill(null); // the last x placed in each row and whether folded
  const at = new Map();

  function earliestIn(row, folded) {
    const before = last[row];
    if (!before) return 0;
    return before.x + (folded && before.folded ? fold : slot);
  }

  function place(id, earliest) {
    const row = rows.get(nodes.get(id).layer);
    const node = nodes.get(id);
    const kids = children.get(id) || [];
    const folded = !kids.length && node.layer > 0 && (node.members ?? 1) > 0;
    let x;
    if (kids.length) {
      // start the members so that their middle is no left of this row's next free place
      const start = Math.max(earliest, earliestIn(row, false) - ((kids.length - 1) * slot) / 2);
      const xs = kids.map((kid, i) => place(kid, start + i * slot));
      x = Math.max((xs[0] + xs[xs.length - 1]) / 2, earliestIn(row, false));
    } else {
      x = Math.max(earliest, earliestIn(row, folded));
    }
    last[row] = { x, folded };
    at.set(id, { x, y: row * band, folded });
    return x;
  }

  for (const id of roots) if (!at.has(id)) place(id, 0);
  return at;
}
