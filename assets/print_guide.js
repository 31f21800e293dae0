() => {
  const md = document.querySelector('#$text_id .prose');
  const w = window.open('', '_blank');
  if (!md || !w) return;
  w.document.write('<!doctype html><title>Teacher guide</title><style>body{font:14px/1.45 ' +
    'system-ui,sans-serif;max-width:46em;margin:2em auto}h2{break-after:avoid}</style>' +
    md.innerHTML);
  w.document.close(); w.focus(); w.print();
}
