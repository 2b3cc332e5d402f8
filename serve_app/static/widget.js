/* The moderation widget (docs/widget.md). One script tag, no dependencies, no build step:
 *   <script src="https://moderation.example/v1/widget.js" data-token="wt_..." defer></script>
 *   <textarea name="comment" data-moderation-check></textarea>
 *   <input type="file" name="photo" accept="image/*" data-moderation-check>
 * Before the form is sent, each checked field's content is checked with the page's widget token. On `review` or
 * `block` an accessible warning offers "Edit" and, where the profile allows it, "Post anyway". The answer's signed
 * verdict goes to the site's backend in a hidden field (moderation_verdict_<field name>), which redeems it once.
 * When the service cannot be reached the form is sent as it is, without verdicts: the site's backend decides. */
(function () {
  "use strict";
  var script = document.currentScript;
  if (!script) return;
  var base = new URL(script.src).origin;
  var data = script.dataset;
  var text = {
    review: data.msgReview || "This may hurt someone. Would you like to edit it before posting?",
    block: data.msgBlock || "This breaks the community rules and cannot be posted as it is. Please edit it.",
    edit: data.msgEdit || "Edit",
    postAnyway: data.msgPostAnyway || "Post anyway"
  };
  var TIMEOUT_MS = Number(data.timeoutMs) || 5000;
  var FIELDS = "[data-moderation-check]";

  function content(field) {
    if (field.type === "file") return field.files && field.files[0] ? field.files[0] : null;
    return field.value.trim() ? field.value : null;
  }

  function check(field, value) {
    var image = field.type === "file";
    var body = image ? new FormData() : JSON.stringify({ text: value });
    if (image) body.append("image", value);
    var headers = { Authorization: "Bearer " + data.token };
    if (!image) headers["Content-Type"] = "application/json";
    var abort = new AbortController();
    var timer = setTimeout(function () { abort.abort(); }, TIMEOUT_MS);
    return fetch(base + "/v1/widget/check-" + (image ? "image" : "text"), {
      method: "POST", headers: headers, body: body, credentials: "omit", mode: "cors", signal: abort.signal
    }).then(function (response) {
      if (!response.ok) throw new Error("moderation answered " + response.status);
      return response.json();
    }).finally(function () { clearTimeout(timer); });
  }

  function verdictInput(form, field) {
    var name = field.dataset.verdictField || "moderation_verdict_" + field.name;
    var input = form.querySelector('input[type=hidden][name="' + name + '"]');
    if (!input) {
      input = document.createElement("input");
      input.type = "hidden";
      input.name = name;
      form.appendChild(input);
    }
    return input;
  }

  function clearWarning(form) {
    var old = form.querySelector(".moderation-warning");
    if (old) old.remove();
    form.querySelectorAll(FIELDS).forEach(function (field) {
      field.removeAttribute("aria-invalid");
      field.removeAttribute("aria-describedby");
    });
  }

  function button(label, onClick) {
    var b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    b.addEventListener("click", onClick);
    return b;
  }

  function warn(form, submitter, flagged) {
    clearWarning(form);
    var first = flagged[0];
    var blocked = flagged.some(function (f) { return f.answer.decision === "block"; });
    var mayPost = flagged.every(function (f) { return f.answer.may_post; });
    var box = document.createElement("div");
    box.className = "moderation-warning";
    box.id = "moderation-warning-" + Math.random().toString(36).slice(2);
    box.setAttribute("role", "alert");
    box.addEventListener("keydown", function (e) { if (e.key === "Escape") edit.click(); });
    var message = document.createElement("p");
    message.textContent = blocked && !mayPost ? text.block : text.review;
    box.appendChild(message);
    var edit = button(text.edit, function () { clearWarning(form); first.field.focus(); });
    box.appendChild(edit);
    if (mayPost) box.appendChild(button(text.postAnyway, function () { clearWarning(form); send(form, submitter); }));
    flagged.forEach(function (f) {
      f.field.setAttribute("aria-invalid", "true");
      f.field.setAttribute("aria-describedby", box.id);
    });
    first.field.insertAdjacentElement("afterend", box);
    form.dataset.moderationState = "warned";
    edit.focus();
  }

  function send(form, submitter) {
    form.dataset.moderationPassing = "1";
    if (form.requestSubmit) form.requestSubmit(submitter || undefined);
    else form.submit();
  }

  function onSubmit(event) {
    var form = event.target;
    if (form.dataset.moderationPassing) { delete form.dataset.moderationPassing; return; }
    if (form.dataset.moderationState === "checking") { event.preventDefault(); return; } // a second click waits
    var marked = Array.prototype.slice.call(form.querySelectorAll(FIELDS));
    // A field emptied since its last check must not carry that check's verdict.
    marked.forEach(function (field) { if (!content(field)) verdictInput(form, field).value = ""; });
    var fields = marked.filter(content);
    if (!fields.length || !data.token) return;
    event.preventDefault();
    var submitter = event.submitter;
    form.dataset.moderationState = "checking";
    Promise.all(fields.map(function (field) {
      return check(field, content(field)).then(function (answer) {
        verdictInput(form, field).value = answer.verdict;
        return { field: field, answer: answer };
      });
    })).then(function (results) {
      var flagged = results.filter(function (r) { return r.answer.decision !== "allow"; });
      if (flagged.length) return warn(form, submitter, flagged);
      form.dataset.moderationState = "passed";
      send(form, submitter);
    }, function () {
      // Unreachable, refused or too slow: never hold the form; no verdict goes with it, so the backend decides.
      fields.forEach(function (field) { verdictInput(form, field).value = ""; });
      form.dataset.moderationState = "unavailable";
      send(form, submitter);
    });
  }

  document.addEventListener("submit", function (event) {
    if (event.target.querySelector && event.target.querySelector(FIELDS)) onSubmit(event);
  }, true);
})();
