() => { if (window.__labMoveAnswered) window.__labMoveAnswered(); }
