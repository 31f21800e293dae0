() => {
  const toStart = () => { const t = document.querySelector('#lesson-tabs'); if (!t) return;
    const y = t.getBoundingClientRect().top + window.scrollY;
    if (window.scrollY > y + 1) window.scrollTo({top: y, behavior: 'instant'}); };
  document.addEventListener('click', e => {
    if (e.target.closest('#lesson-tabs > .tab-wrapper button[role=tab], button.lab-next'))
      requestAnimationFrame(() => requestAnimationFrame(toStart)); }, true);
  const showTerm = (id, tries) => { const t = document.getElementById(id);
    if (t && t.offsetParent !== null) { t.scrollIntoView({block: 'center', behavior: 'instant'});
      return; }
    if (tries > 0) setTimeout(() => showTerm(id, tries - 1), 100); };
  document.addEventListener('click', e => {
    const a = e.target.closest && e.target.closest('a[href^="?lesson=glossary#gl-"]');
    if (!a || e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey) return;
    e.preventDefault();
    const tab = document.querySelector(
      '#lesson-tabs > .tab-wrapper [role=tab][data-tab-id="glossary"]');
    if (tab) tab.click();
    showTerm(a.getAttribute('href').split('#')[1], 30); }, true);
  if (location.hash.startsWith('#gl-')) showTerm(location.hash.slice(1), 100);
  const showTab = () => {  // a phone's tab strip scrolls sideways: keep the open tab in it
    const s = document.querySelector('#lesson-tabs > .tab-wrapper .tab-container');
    const t = s && s.querySelector('[role=tab][aria-selected=true]');
    if (!t || s.scrollWidth <= s.clientWidth) return;
    const a = s.getBoundingClientRect(), b = t.getBoundingClientRect();
    if (b.left < a.left || b.right > a.right)
      s.scrollLeft += b.left - a.left - (a.width - b.width) / 2; };
  new MutationObserver(showTab).observe(document.body,
    {subtree: true, attributes: true, attributeFilter: ['aria-selected']});
  showTab();
}
