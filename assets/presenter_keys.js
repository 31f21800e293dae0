() => {
  const present = (on) => {
    document.body.classList.toggle('lab-presenting', on);
    if (on) window.scrollTo({top: 0, behavior: 'instant'});
  };
  if (new URLSearchParams(location.search).get('present') === '1') present(true);
  if (window.__labPresenterKeys) return;
  window.__labPresenterKeys = true;
  document.addEventListener('click', (e) => {
    const tab = e.target.closest && e.target.closest('#lesson-tabs > .tab-wrapper [role=tab]');
    if (tab) present(tab.dataset.tabId === 'present');
    if (e.target.closest && e.target.closest('#present-hint .lab-present-exit')) present(false);
  });
  // Moves in order: a move is sent once every earlier move's answer is drawn (MOVE_JS waits,
  // ANSWERED_JS releases), or else an earlier answer could land over a later one. A lost
  // answer holds the others 10 s at most.
  const waiting = [];
  let last = Promise.resolve();
  window.__labMoveTurn = () => {
    const before = last;
    let release;
    last = new Promise((r) => { release = r; });
    const done = () => {
      const i = waiting.indexOf(done);
      if (i >= 0) waiting.splice(i, 1);
      release();
    };
    waiting.push(done);
    setTimeout(done, 10000);
    return before;
  };
  window.__labMoveAnswered = () => { if (waiting.length) waiting[0](); };
  const keys = {ArrowRight: 'present-next', PageDown: 'present-next',
                ArrowLeft: 'present-back', PageUp: 'present-back'};
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && document.body.classList.contains('lab-presenting')) {
      present(false);
      return;
    }
    const id = keys[e.key];
    if (!id || e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) return;
    const t = e.target;
    if (t && t.closest && t.closest(
        'input, textarea, select, [contenteditable=true], [role=slider], [role=tab]')) return;
    const b = document.getElementById(id);
    if (!b || b.offsetParent === null || b.disabled) return;
    e.preventDefault();
    b.click();
  });
}
