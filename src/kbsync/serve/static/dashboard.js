// The dashboard's one script, a file so that the Content Security Policy allows no inline
// script: a form with data-confirm asks before it is sent.
document.addEventListener("submit", (event) => {
  const question = event.target.dataset && event.target.dataset.confirm;
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});
