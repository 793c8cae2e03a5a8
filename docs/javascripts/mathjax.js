// MathJax typesets \( \) and \[ \] wherever they appear in the page's text: in the math that pymdownx.arithmatex
// (generic mode) wraps, and in the docstrings, which write math as \\( \\) (Hugging Face doc-builder style) and so
// reach the page as \( \). Code blocks are left alone.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
};

document$.subscribe(() => {
  MathJax.startup.output.clearCache();
  MathJax.typesetClear();
  MathJax.texReset();
  MathJax.typesetPromise();
});
