() => {
  if (window.__labChartCsv) return;
  window.__labChartCsv = true;
  const cell = (v) => {
    const s = v === null || v === undefined ? '' : String(v);
    return /[",\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  };
  const title = (gd) => {
    const t = gd.layout && gd.layout.title;
    return ((t && (t.text || t)) || 'chart').toString().replace(/<br>/g, ' ');
  };
  window.labChartCsv = (gd) => {
    const rows = [['trace', 'x', 'y', 'z']];
    for (const t of gd.data || []) {
      const name = (t.name || t.type || '').replace(/<br>/g, ' ');
      if (t.z) {
        t.z.forEach((row, i) => (row || []).forEach((z, j) =>
          rows.push([name, t.x ? t.x[j] : j, t.y ? t.y[i] : i, z])));
      } else {
        const n = Math.max((t.x || []).length, (t.y || []).length);
        for (let k = 0; k < n; k++)
          rows.push([name, t.x ? t.x[k] : k, t.y ? t.y[k] : '', '']);
      }
    }
    return {name: title(gd), csv: rows.map(r => r.map(cell).join(',')).join('\n') + '\n'};
  };
  const add = () => document.querySelectorAll('.js-plotly-plot').forEach((gd) => {
    const box = gd.parentElement;
    if (!box || box.querySelector(':scope > .lab-csv') || !(gd.data || []).length) return;
    const b = document.createElement('button');
    b.className = 'lab-csv';
    b.type = 'button';
    b.textContent = 'Data as CSV';
    b.title = 'Download the points this chart draws';
    b.onclick = () => {
      const {name, csv} = window.labChartCsv(gd);
      const a = document.createElement('a');
      a.href = URL.createObjectURL(new Blob([csv], {type: 'text/csv'}));
      a.download = (name.replace(/[^A-Za-z0-9]+/g, '-').replace(/^-|-$/g, '').slice(0, 60)
                    || 'chart') + '.csv';
      document.body.appendChild(a); a.click(); a.remove();
    };
    box.appendChild(b);
  });
  new MutationObserver(add).observe(document.body, {childList: true, subtree: true});
  add();
}
