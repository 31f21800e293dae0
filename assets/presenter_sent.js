() => {
  const r = document.querySelector('#present-result .present-result');
  const b = document.getElementById('present-run');
  if (!r || !b) return;
  r.className = 'present-result present-running present-sent';
  r.setAttribute('role', 'status');
  r.replaceChildren(...['present-label', 'present-detail'].map(c => {
    const d = document.createElement('div'); d.className = c; return d; }));
  r.children[0].textContent = '⏳ ' + b.innerText.trim() + ': sent';
  r.children[1].textContent = 'waiting for its turn on the model (the class shares it)';
}
