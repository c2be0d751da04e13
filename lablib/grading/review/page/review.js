// The review page of `lablib review`: one written question across the class.
// Every change is POSTed to /api/change and stored before the page shows it; the page
// re-reads the question every 10 s so that a second grader's changes appear.
"use strict";

const state = { questions: [], current: null, data: null, focus: 0, selected: new Set(), busy: false };
const $ = (id) => document.getElementById(id);

function say(text, error) {
  $("status").textContent = text || "";
  $("status").className = error ? "error" : "";
}

async function api(path, body) {
  const options = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
  const response = await fetch(path, options);
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

async function change(body) {
  state.busy = true;
  say("saving…");
  try {
    const data = await api("/api/change", Object.assign({ question: state.current }, body));
    if (data.answers) { state.data = data; render(); }
    await loadQuestions();
    say(data.message || "saved");
    return data;
  } catch (err) {
    say("Not saved: " + err.message, true);
  } finally {
    state.busy = false;
  }
}

async function loadQuestions() {
  const info = await api("/api/questions");
  state.questions = info.questions;
  $("lab").textContent = info.title + (info.grader ? " · grading as " + info.grader : "");
  document.title = "review: " + info.title;
  const nav = $("questions");
  nav.replaceChildren();
  for (const q of info.questions) {
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.question = q.id;
    button.textContent = `${q.id} (${q.graded}/${q.answers})`;
    button.title = q.title;
    if (q.id === state.current) button.className = "current";
    button.addEventListener("click", () => openQuestion(q.id));
    nav.appendChild(button);
  }
  const q = info.questions.find((x) => x.id === state.current);
  if (q) {
    const done = q.graded;
    $("bar").style.width = (q.answers ? (100 * done) / q.answers : 0) + "%";
    $("progress-text").textContent = `${done} of ${q.answers} graded` + (q.stale ? `, ${q.stale} changed since` : "");
  }
}

async function openQuestion(id) {
  state.current = id;
  state.focus = 0;
  state.selected.clear();
  history.replaceState(null, "", "#" + id);
  state.data = null;  // no key acts on the previous question's answers while this one loads
  $("answers").replaceChildren();
  state.data = await api("/api/question/" + id);
  await loadQuestions();
  render();
}

function itemById(id) {
  return state.data.rubric.find((item) => item.id === id);
}

function targets() {
  const answers = state.data.answers;
  if (state.selected.size) return answers.filter((a) => state.selected.has(a.token));
  return answers[state.focus] ? [answers[state.focus]] : [];
}

function toggleItem(item) {
  const chosen = targets();
  if (!chosen.length) return;
  if (state.selected.size) { state.selected.clear(); render(false); }  // a selection is used once
  const allHave = chosen.every((a) => a.items.includes(item.id));
  const body = { action: "grade", answers: chosen.map((a) => a.token) };
  body[allHave ? "remove" : "add"] = item.id;
  change(body);
}

function renderRubric() {
  const list = $("items");
  list.replaceChildren();
  const focused = state.data.answers[state.focus];
  state.data.rubric.forEach((item, index) => {
    const li = document.createElement("li");
    li.dataset.item = item.id;
    if (focused && focused.items.includes(item.id)) li.className = "on";
    const apply = document.createElement("button");
    apply.type = "button";
    apply.className = "apply";
    apply.title = index < 9 ? `key ${index + 1}` : "";
    const points = document.createElement("span");
    points.className = "points";
    points.textContent = (item.points >= 0 ? "+" : "") + item.points;
    const comment = document.createElement("span");
    comment.className = "comment";
    comment.textContent = item.comment;
    const uses = document.createElement("span");
    uses.className = "uses";
    uses.textContent = `(${item.uses})`;
    apply.append(points, comment, uses);
    apply.addEventListener("click", () => toggleItem(item));
    const edit = document.createElement("button");
    edit.type = "button";
    edit.className = "edit";
    edit.textContent = "edit";
    edit.addEventListener("click", () => editItem(item));
    li.append(apply, edit);
    list.appendChild(li);
  });
  $("selection").textContent = state.selected.size ? `· applies to ${state.selected.size} selected` : "";
}

function editItem(item) {
  const points = prompt(`Points of "${item.comment}" (applied to ${item.uses} answers: their scores change too)`,
                        String(item.points));
  if (points === null) return;
  const comment = prompt("Comment the student reads (empty: delete the item)", item.comment);
  if (comment === null) return;
  if (comment.trim() === "") change({ action: "delete-item", id: item.id });
  else change({ action: "item", id: item.id, points: Number(points), comment: comment });
}

function badge(answer) {
  const span = document.createElement("span");
  if (answer.stale) { span.className = "badge stale"; span.textContent = "answer changed since graded"; }
  else if (answer.graded) { span.className = "badge done"; span.textContent = `${answer.score} / ${state.data.points}`; }
  else { span.className = "badge todo"; span.textContent = "to grade"; }
  return span;
}

function renderAnswers() {
  const box = $("answers");
  const keep = document.activeElement && document.activeElement.closest(".answer")
    ? document.activeElement.dataset.field + ":" + document.activeElement.closest(".answer").dataset.token : null;
  box.replaceChildren();
  state.data.answers.forEach((answer, index) => {
    const card = document.createElement("article");
    card.className = "answer" + (index === state.focus ? " focused" : "") +
      (state.selected.has(answer.token) ? " selected" : "");
    card.dataset.token = answer.token;
    card.dataset.number = answer.number;
    const head = document.createElement("h3");
    const title = document.createElement("span");
    title.textContent = `Answer ${answer.number} of ${state.data.answers.length}`;
    const select = document.createElement("input");
    select.type = "checkbox";
    select.checked = state.selected.has(answer.token);
    select.title = "select (x)";
    select.addEventListener("change", () => { toggleSelect(answer); });
    head.append(select, title, badge(answer));
    const body = document.createElement("div");
    body.className = "md";
    if (answer.empty) {
      body.innerHTML = "";
      const p = document.createElement("p");
      p.className = "empty";
      p.textContent = "No answer written.";
      body.appendChild(p);
    } else {
      body.innerHTML = answer.html;  // rendered by the server with raw HTML disabled
    }
    card.append(head, body);
    if (answer.notes.length) {
      const notes = document.createElement("p");
      notes.className = "notes";
      notes.textContent = "Note: " + answer.notes.join("; ");
      card.appendChild(notes);
    }
    const chips = document.createElement("div");
    chips.className = "chips";
    for (const id of answer.items) {
      const item = itemById(id);
      if (!item) continue;
      const chip = document.createElement("span");
      chip.textContent = `${item.points >= 0 ? "+" : ""}${item.points} ${item.comment}`;
      chips.appendChild(chip);
    }
    card.appendChild(chips);
    const own = document.createElement("div");
    own.className = "own";
    const comment = document.createElement("textarea");
    comment.placeholder = "your comment to this student (saved when you leave the box)";
    comment.value = answer.comment;
    comment.dataset.field = "comment";
    comment.addEventListener("change", () =>
      change({ action: "grade", answers: [answer.token], comment: comment.value }));
    const adjust = document.createElement("input");
    adjust.type = "number";
    adjust.step = "0.5";
    adjust.value = answer.adjustment;
    adjust.title = "points added or removed beyond the rubric";
    adjust.dataset.field = "adjustment";
    adjust.addEventListener("change", () =>
      change({ action: "grade", answers: [answer.token], adjustment: Number(adjust.value || 0) }));
    own.append(comment, adjust);
    card.appendChild(own);
    card.addEventListener("click", (event) => {
      if (event.target.closest("textarea, input")) return;
      state.focus = index; render(false);
    });
    box.appendChild(card);
  });
  if (keep) {
    const [field, token] = keep.split(":");
    const el = box.querySelector(`.answer[data-token="${token}"] [data-field="${field}"]`);
    if (el) el.focus();
  }
}

function render(scroll = true) {
  const data = state.data;
  $("q-title").textContent = `${data.id}: ${data.title} (${data.points} points)`;
  $("q-prompt").innerHTML = data.prompt || "<p>(the released lab's text of this question was not found)</p>";
  $("q-model").innerHTML = data.model || "<p>No model answer: start <code>lablib review</code> with " +
    "<code>--solution</code> (the solution notebook) to see it here.</p>";
  renderRubric();
  renderAnswers();
  const focused = document.querySelector(".answer.focused");
  if (scroll && focused) focused.scrollIntoView({ block: "nearest" });
}

function toggleSelect(answer) {
  if (state.selected.has(answer.token)) state.selected.delete(answer.token);
  else state.selected.add(answer.token);
  render(false);
}

function move(step) {
  const n = state.data.answers.length;
  if (!n) return;
  state.focus = Math.max(0, Math.min(n - 1, state.focus + step));
  render();
}

function nextToGrade() {
  const answers = state.data.answers;
  for (let k = 1; k <= answers.length; k++) {
    const i = (state.focus + k) % answers.length;
    if (!answers[i].graded || answers[i].stale) { state.focus = i; render(); return; }
  }
  say("Every answer to this question is graded.");
}

document.addEventListener("keydown", (event) => {
  if (!state.data || event.ctrlKey || event.metaKey || event.altKey) return;
  const typing = event.target.closest && event.target.closest("textarea, input");
  if (event.key === "Escape") {
    if (typing) event.target.blur();
    state.selected.clear();
    render(false);
    return;
  }
  if (typing) return;
  const answers = state.data.answers;
  if (event.key === "j" || event.key === "ArrowDown") move(1);
  else if (event.key === "k" || event.key === "ArrowUp") move(-1);
  else if (event.key === "n") nextToGrade();
  else if (event.key === "x" && answers[state.focus]) toggleSelect(answers[state.focus]);
  else if (event.key === "u") {
    answers.filter((a) => !a.graded || a.stale).forEach((a) => state.selected.add(a.token));
    render(false);
  } else if (event.key === "c") {
    const box = document.querySelector(".answer.focused textarea");
    if (box) box.focus();
  } else if (event.key === "[" || event.key === "]") {
    const ids = state.questions.map((q) => q.id);
    const i = ids.indexOf(state.current) + (event.key === "]" ? 1 : -1);
    if (i >= 0 && i < ids.length) openQuestion(ids[i]);
  } else if (/^[1-9]$/.test(event.key)) {
    const item = state.data.rubric[Number(event.key) - 1];
    if (item) toggleItem(item);
  } else return;
  event.preventDefault();
});

$("new-item").addEventListener("submit", (event) => {
  event.preventDefault();
  change({ action: "item", points: Number($("new-points").value), comment: $("new-comment").value })
    .then((data) => { if (data) { $("new-points").value = ""; $("new-comment").value = ""; } });
});

$("write").addEventListener("click", () => change({ action: "write" }));

setInterval(async () => {
  if (!state.current || state.busy || document.hidden) return;
  if (document.activeElement && document.activeElement.closest(".answer")) return;  // typing
  try {
    const data = await api("/api/question/" + state.current);
    state.data = data;
    render(false);
    await loadQuestions();
  } catch (err) { say("The review server does not answer: " + err.message, true); }
}, 10000);

(async () => {
  try {
    await loadQuestions();
    const wanted = location.hash.slice(1);
    const first = state.questions.find((q) => q.id === wanted) || state.questions[0];
    if (first) await openQuestion(first.id);
  } catch (err) { say(err.message, true); }
})();
