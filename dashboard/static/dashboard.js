// The dashboard's keyboard shortcuts and image reveal: a few lines of plain JavaScript, no framework, no build.
// j / k: next / previous (queue rows, or items); Enter opens a row; a / r: approve / reject with the chosen
// reason ("decide and next": the server answers with the next item); v: show a blurred image; ?: help.
(function () {
  "use strict";
  const typing = (el) => el && (el.isContentEditable || /^(INPUT|SELECT|TEXTAREA)$/.test(el.tagName));
  const rows = () => Array.from(document.querySelectorAll("table[data-keynav] tbody tr"));
  let selected = -1;

  function select(index) {
    const all = rows();
    if (!all.length) return;
    selected = Math.max(0, Math.min(all.length - 1, index));
    all.forEach((row, i) => row.classList.toggle("selected", i === selected));
    const link = all[selected].querySelector("a.row-link");
    if (link) link.focus();
  }

  function follow(id) {
    const link = document.getElementById(id);
    if (link) window.location.href = link.href;
  }

  function submit(id) {
    const form = document.getElementById(id);
    if (form) form.requestSubmit();
  }

  function reveal() {
    const figure = document.getElementById("preview");
    if (!figure) return;
    const shown = figure.classList.toggle("blurred") === false;
    figure.querySelector("button.reveal").setAttribute("aria-pressed", String(shown));
  }

  document.addEventListener("click", (event) => {
    if (event.target.closest("button.reveal")) reveal();
  });

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    const help = document.getElementById("help");
    const onQueue = rows().length > 0;
    const actions = {
      j: () => (onQueue ? select(selected + 1) : follow("next-link")),
      k: () => (onQueue ? select(selected - 1) : follow("prev-link")),
      a: () => submit("approve-form"),
      r: () => submit("reject-form"),
      v: reveal,
      "?": () => (help.open ? help.close() : help.showModal()),
    };
    const action = actions[event.key];
    if (action) {
      event.preventDefault();
      action();
    }
  });
})();
