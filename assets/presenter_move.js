async (p) => {
  if (window.__labMoveTurn) await window.__labMoveTurn();
  return p;
}
