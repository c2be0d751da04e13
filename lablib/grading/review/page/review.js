// The review page of `lablib review`: one written question across the class.
//
// Every change is POSTed to /api/change and stored before the page shows it. The page
// asks every 10 s for what changed since the version it has (a second grader's changes,
// a regrade), and only that comes back.
//
// Students' text is hostile. The server sanitises it (render.py); here it is parsed by the
// browser in an inert document, checked again against the same allowlist (ALLOWED below),
// and put in a shadow root of its own: nothing in it is found by the page's lookups, joins
// the page's forms or takes the page's styles. The page's own fields are looked up once,
// before any answer exists, and held by reference (ui, and each card's refs).
//
// Why shadow roots and not sandboxed <iframe srcdoc>: a frame without allow-scripts and
// allow-same-origin cannot tell the page its height (every answer a fixed box with its own
// scroll bar) and takes the keyboard when clicked (the page is graded by keys). What such a
// frame would add, the CSP gives the whole page: no inline script or handler, no inline
// style, no frame, form post, <base> or load from elsewhere; and a shadow root ignores
// <meta> and <base> (test_review_attacks.py shows both with the sanitisers skipped).
"use strict";

const ui = {};
for (const id of ["lab", "questions", "bar", "progress-text", "write", "status", "q-title", "q-prompt", "q-model",
                  "answers", "items", "selection", "new-item", "new-points", "new-comment", "page-prev", "page-next",
                  "page-text", "filter", "unreadable"]) {
  ui[id.replace(/-(\w)/g, (_, c) => c.toUpperCase())] = document.getElementById(id);
}
Object.freeze(ui);

// This run's credential: the printed address carries it once; the tab keeps it
// (sessionStorage is this origin's, port included) and the address bar loses it.
const TOKEN = (() => {
  const given = new URLSearchParams(location.search).get("token");
  if (given) {
    sessionStorage.setItem("lablib-review-token", given);
    history.replaceState(null, "", location.pathname + location.hash);
  }
  return given || sessionStorage.getItem("lablib-review-token") || "";
})();

const TEXTS_PER_REQUEST = 4;
// order: the answers listed (all of them, or those the filter keeps); all: every answer.
const state = {
  questions: [], current: null, data: null, order: [], all: [], byToken: new Map(), shown: new Map(),
  cards: new Map(), page: 0, focus: 0, selected: new Set(), busy: false, version: 0, generation: 0,
  loading: new Set(), filter: "all", reveal: false, revealed: new Map(),
};

function say(text, error) {
  ui.status.textContent = text || "";
  ui.status.className = error ? "error" : "";
}

class ApiError extends Error {
  constructor(status, data) {
    super((data && data.error) || String(status));
    this.status = status;
    this.data = data || {};
  }
}

async function api(path, body) {
  const options = { headers: { Authorization: "Bearer " + TOKEN } };
  if (body !== undefined) {
    options.method = "POST";
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  let data = null;
  try { data = await response.json(); } catch (err) { data = { error: response.statusText }; }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

// ------------------------------------------------------------------ students' text

const MARKDOWN_TAGS = ["p", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "ul", "ol", "li", "pre", "code", "em",
  "strong", "hr", "br", "table", "thead", "tbody", "tr", "th", "td", "s", "span"];
const MATHML_TAGS = ["math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msub", "msup", "msubsup", "munder",
  "mover", "munderover", "mfrac", "msqrt", "mroot", "mstyle", "mtable", "mtr", "mtd", "mpadded", "mphantom",
  "menclose"];
const MATH_ATTRIBUTES = ["display", "mathvariant", "displaystyle", "scriptlevel", "stretchy", "fence", "form",
  "separator", "accent", "accentunder", "lspace", "rspace", "minsize", "maxsize", "movablelimits", "largeop",
  "symmetric", "linethickness", "notation", "width", "height", "depth", "voffset", "columnalign", "columnspacing",
  "columnlines", "rowspacing", "rowlines", "mathsize"];
const HTML_NS = "http://www.w3.org/1999/xhtml";
const MATHML_NS = "http://www.w3.org/1998/Math/MathML";
const ALLOWED = new Map([
  ...MARKDOWN_TAGS.map((t) => [t, new Set()]), ...MATHML_TAGS.map((t) => [t, new Set(MATH_ATTRIBUTES)])]);
for (const [tag, attrs] of [["ol", ["start"]], ["code", ["title", "class"]],
                            ["pre", ["title", "class"]], ["span", ["class"]], ["p", ["class"]]]) {
  attrs.forEach((a) => ALLOWED.get(tag).add(a));
}
const CLASSES = { code: ["tex"], pre: ["tex", "rest"], span: ["image", "link"], p: ["cut"] };

function allowedAttribute(tag, name, value) {
  if (!ALLOWED.get(tag).has(name)) return false;
  if (name === "class") return value.split(/\s+/).every((c) => (CLASSES[tag] || []).includes(c));
  return true;
}

// The sanitised HTML parsed where nothing runs or loads (an inert document), every node
// checked against ALLOWED once more, then moved into `root` (a shadow root).
function putText(root, html) {
  const doc = new DOMParser().parseFromString("<!DOCTYPE html><body>" + (html || ""), "text/html");
  let dropped = 0;
  const walk = (node) => {
    for (const child of Array.from(node.childNodes)) {
      if (child.nodeType === Node.TEXT_NODE) continue;
      if (child.nodeType !== Node.ELEMENT_NODE) { child.remove(); continue; }
      const tag = child.localName;
      const ns = child.namespaceURI;
      const ok = ALLOWED.has(tag) && ((ns === HTML_NS && MARKDOWN_TAGS.includes(tag)) ||
                                      (ns === MATHML_NS && MATHML_TAGS.includes(tag)));
      if (!ok) { child.remove(); dropped++; continue; }
      for (const attr of Array.from(child.attributes)) {
        if (!allowedAttribute(tag, attr.name, attr.value)) { child.removeAttribute(attr.name); dropped++; }
      }
      walk(child);
    }
  };
  walk(doc.body);
  if (dropped) console.warn(`review: ${dropped} element(s) or attribute(s) outside the allowlist dropped`);
  const fragment = document.createDocumentFragment();
  for (const node of Array.from(doc.body.childNodes)) fragment.appendChild(document.adoptNode(node));
  root.replaceChildren(fragment);
}

// The host draws nothing outside its own box (a formula raised or lowered past its line,
// \smash{\raise{30pt}{...}}, would cover the card's header or its neighbours): its
// painting is contained and clipped, and what honestly overflows (a formula wider than the
// card) scrolls within it. An answer's headings are the size of its text: "### Answer 3 of
// 4  5 / 5" in an answer was drawn larger than the card's own header.
const TEXT_STYLE = `
:host { display: block; overflow-wrap: anywhere; overflow: auto; contain: paint; position: relative;
        isolation: isolate; }
:host([hidden]) { display: none; }
pre { white-space: pre-wrap; background: #f4f4f4; padding: 0.3em; }
pre.tex, code.tex { color: #a00; }
math[display="block"] { margin: 0.5em 0; }
p.cut { color: #666; font-style: italic; }
h1, h2, h3, h4, h5, h6 { font-size: 1em; margin: 0.5em 0 0.2em; }
span.image, span.link { color: #666; font-style: italic; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ccc; padding: 0.1em 0.4em; }
blockquote { border-left: 3px solid #ddd; margin-left: 0; padding-left: 0.8em; color: #444; }
`;
let textSheet = null;
function textRoot(host) {
  const root = host.shadowRoot || host.attachShadow({ mode: "open" });
  if (!textSheet) { textSheet = new CSSStyleSheet(); textSheet.replaceSync(TEXT_STYLE); }
  root.adoptedStyleSheets = [textSheet];
  return root;
}

// ------------------------------------------------------------------ the question's state

function meta(token) { return state.byToken.get(token); }
function itemById(id) { return state.data.rubric.find((item) => item.id === id); }
function pageSize() { return state.data.page_size || 50; }
function pageOf(index) { return Math.floor(index / pageSize()); }
function pageTokens() {
  return state.order.slice(state.page * pageSize(), (state.page + 1) * pageSize());
}

// An answer the list says is empty is shown as "No answer written." at once, for its digest.
function showEmpty(answer) {
  if (answer.empty) state.shown.set(answer.token, { digest: answer.digest, html: "", full: true, empty: true });
}

// New rows from the server (a change's answer, a refresh, a refusal): kept, and their cards updated.
function merge(data) {
  if (data.rubric) state.data.rubric = data.rubric;
  const stale = [];
  for (const answer of data.answers || []) {
    state.byToken.set(answer.token, answer);
    const shown = state.shown.get(answer.token);
    if (shown && shown.digest !== answer.digest) { state.shown.delete(answer.token); stale.push(answer.token); }
    if (!state.shown.has(answer.token)) showEmpty(answer);
  }
  if (data.rubric) renderRubric();
  renderFilter();
  for (const token of pageTokens()) updateCard(token);
  if (stale.length) loadTexts();
}

async function loadQuestions() {
  const info = await api("/api/questions");
  state.questions = info.questions;
  state.reveal = Boolean(info.reveal);
  ui.lab.textContent = info.title + (info.grader ? " · grading as " + info.grader : "");
  document.title = "review: " + info.title;
  ui.questions.replaceChildren();
  for (const q of info.questions) {
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.question = q.id;
    button.textContent = `${q.id} ${q.graded}/${q.answers}`;
    button.title = q.title;
    if (q.id === state.current) button.className = "current";
    button.addEventListener("click", () => openQuestion(q.id));
    ui.questions.appendChild(button);
  }
  const q = info.questions.find((x) => x.id === state.current);
  if (q) {
    ui.bar.style.width = (q.answers ? (100 * q.graded) / q.answers : 0) + "%";
    ui.progressText.textContent = [`${q.graded}/${q.answers} graded`, q.stale ? `${q.stale} changed` : "",
      q.flagged ? `${q.flagged} flagged` : "", q.unreadable ? `${q.unreadable} unreadable` : ""]
      .filter(Boolean).join(" · ");
    ui.progressText.title = `${q.graded} of ${q.answers} answers graded; ${q.stale} changed since graded; ` +
      `${q.flagged} flagged for a second look; ${q.unreadable} notebooks could not be read`;
  }
}

function takeQuestion(data) {
  state.data = data;
  state.version = data.version;
  state.generation = data.generation;
  state.all = data.answers.map((a) => a.token);
  state.byToken = new Map(data.answers.map((a) => [a.token, a]));
  state.order = state.all.filter(filterTest(state.filter));
  for (const [token, shown] of state.shown) {
    const now = state.byToken.get(token);
    if (!now || now.digest !== shown.digest) state.shown.delete(token);
  }
  for (const answer of data.answers) if (!state.shown.has(answer.token)) showEmpty(answer);
}

async function openQuestion(id) {
  state.current = id;
  state.focus = 0;
  state.page = 0;
  state.selected.clear();
  state.shown.clear();
  state.revealed.clear();
  state.filter = "all";
  history.replaceState(null, "", "#" + id);
  state.data = null;  // no key acts on the previous question's answers while this one loads
  state.cards.clear();
  ui.answers.replaceChildren();
  takeQuestion(await api("/api/question/" + id));
  await loadQuestions();
  render();
}

// ------------------------------------------------------------------ which answers are listed

// A filter's test of one answer: "all", "todo", "graded", "stale", "flagged", "item:<id>",
// "noitem:<id>", "score:<points>".
function filterTest(filter) {
  const [kind, value] = filter.split(":");
  const tests = {
    all: () => true,
    todo: (a) => !a.graded || a.stale,
    graded: (a) => a.graded && !a.stale,
    stale: (a) => a.stale,
    flagged: (a) => a.flagged,
    item: (a) => a.items.includes(Number(value)),
    noitem: (a) => !a.items.includes(Number(value)),
    score: (a) => a.graded && String(a.score) === value,
  };
  const test = tests[kind] || tests.all;
  return (token) => { const a = meta(token); return Boolean(a) && test(a); };
}

// The filter's choices, from this question's rubric and scores; the one chosen is kept.
function renderFilter() {
  const options = [["all", "all answers"], ["todo", "still to grade"], ["graded", "graded"],
                   ["stale", "changed since graded"], ["flagged", "flagged for a second look"]];
  state.data.rubric.forEach((item, index) => {
    const label = `${item.points >= 0 ? "+" : ""}${item.points} ${item.comment}`.slice(0, 60);
    options.push([`item:${item.id}`, `with item ${index + 1}: ${label}`]);
    options.push([`noitem:${item.id}`, `without item ${index + 1}: ${label}`]);
  });
  const scores = new Set();
  for (const token of state.all) { const a = meta(token); if (a && a.graded) scores.add(a.score); }
  Array.from(scores).sort((x, y) => x - y).forEach((score) => options.push([`score:${score}`, `score ${score}`]));
  if (!options.some(([value]) => value === state.filter)) options.push([state.filter, "(no longer in the rubric)"]);
  const key = JSON.stringify(options);
  if (ui.filter.dataset.options !== key) {
    ui.filter.replaceChildren(...options.map(([value, label]) => {
      const option = document.createElement("option");
      option.value = value;
      option.textContent = "show: " + label;
      return option;
    }));
    ui.filter.dataset.options = key;
  }
  ui.filter.value = state.filter;
}

// List the answers the filter keeps (as they are now: a grade given afterwards does not
// hide an answer until the filter is chosen again).
function applyFilter(filter) {
  const focusToken = state.order[state.focus];
  state.filter = filter;
  state.order = state.all.filter(filterTest(filter));
  state.selected.clear();
  const index = state.order.indexOf(focusToken);
  state.focus = index >= 0 ? index : 0;
  state.page = pageOf(state.focus);
  render();
  const kept = state.order.length;
  say(filter === "all" ? `All ${kept} answers listed.` : `${kept} of ${state.all.length} answers listed (${ui.filter.selectedOptions[0].textContent}).`);
}

// ------------------------------------------------------------------ texts, a few at a time

async function fetchTexts(tokens) {
  const question = state.current;
  tokens.forEach((t) => state.loading.add(t));
  try {
    const data = await api(`/api/texts/${question}?answers=${tokens.join(",")}`);
    if (question !== state.current) return;
    for (const text of data.answers) {
      state.shown.set(text.token, { digest: text.digest, html: text.html, full: false, empty: text.empty });
      updateCard(text.token, true);
    }
  } finally {
    tokens.forEach((t) => state.loading.delete(t));
  }
}

// The page's answers' texts, a few per request, the focused one first and alone; stops
// when the grader moves to another page or question.
async function loadTexts() {
  const wanted = pageTokens().filter((t) => !state.shown.has(t) && !state.loading.has(t));
  const focused = state.order[state.focus];
  wanted.sort((a, b) => (b === focused) - (a === focused));
  const question = state.current;
  const page = state.page;
  for (let k = 0; k < wanted.length;) {
    if (question !== state.current || page !== state.page) return;
    const size = k === 0 && wanted[0] === focused ? 1 : TEXTS_PER_REQUEST;
    const chunk = wanted.slice(k, k + size).filter((t) => !state.shown.has(t) && !state.loading.has(t));
    k += size;
    if (!chunk.length) continue;
    try { await fetchTexts(chunk); } catch (err) { say("The answers' texts did not load: " + err.message, true); return; }
  }
}

async function showAll(token) {
  const answer = meta(token);
  if (!answer || !answer.truncated) return;
  say("loading the whole answer…");
  try {
    const text = await api(`/api/text/${state.current}/${token}`);
    state.shown.set(token, { digest: text.digest, html: text.html, full: true, empty: text.empty });
    updateCard(token, true);
    say(`Answer ${answer.number}: all ${answer.length.toLocaleString()} characters shown.`);
  } catch (err) { say("The answer did not load: " + err.message, true); }
}

// ------------------------------------------------------------------ changes

async function change(body) {
  state.busy = true;
  say("saving…");
  try {
    const data = await api("/api/change", Object.assign({ question: state.current }, body));
    if (data.answers || data.rubric) merge(data);
    await loadQuestions();
    say(data.message || "saved", Boolean(data.changed_text && data.changed_text.length));
    return data;
  } catch (err) {
    if (err.status === 409) {
      merge(err.data);
      say("Not saved: " + err.message, true);
    } else {
      say("Not saved: " + err.message, true);
    }
    return null;
  } finally {
    state.busy = false;
  }
}

function targets() {
  if (state.selected.size) return state.order.filter((t) => state.selected.has(t));
  const token = state.order[state.focus];
  return token ? [token] : [];
}

// A grade names what the page showed of each answer and the version of its grade; an
// answer whose text is still on its way is shown first, and graded for that text.
async function gradeBody(tokens, extra) {
  const missing = tokens.filter((t) => !state.shown.has(t));
  for (let k = 0; k < missing.length; k += 50) {
    try { await fetchTexts(missing.slice(k, k + 50)); } catch (err) { say("Not saved: " + err.message, true); return null; }
  }
  if (tokens.some((t) => !state.shown.has(t))) { say("Not saved: the page changed question meanwhile.", true); return null; }
  const seen = {};
  const versions = {};
  for (const t of tokens) { seen[t] = state.shown.get(t).digest; versions[t] = meta(t).version; }
  return Object.assign({ action: "grade", answers: tokens, seen, versions }, extra);
}

// Changes made by keys in quick succession go one after the other: each is built once the
// one before is answered, from the versions it brought back (two at once would be based on
// the same version, and the second refused as a conflict).
let queue = Promise.resolve();
function inTurn(action) {
  const next = queue.then(action, action);
  queue = next.catch(() => {});
  return next;
}

function toggleItem(item) {
  const chosen = targets();  // the answers focused or selected when the key was pressed
  if (!chosen.length) return null;
  if (state.selected.size) {  // a selection is used once
    state.selected.clear();
    pageTokens().forEach((t) => updateCard(t));
    ui.selection.textContent = "";
  }
  const question = state.current;
  return inTurn(async () => {
    if (question !== state.current) return;
    const allHave = chosen.every((t) => meta(t) && meta(t).items.includes(item.id));
    // the item as read: another grader's change of its points or words since is a conflict
    const which = allHave ? { remove: item.id } : { add: item.id };
    const body = await gradeBody(chosen, Object.assign(which, { item_version: item.version }));
    if (body) await change(body);
  });
}

function toggleFlag() {
  const chosen = targets();
  if (!chosen.length) return null;
  const question = state.current;
  return inTurn(async () => {
    if (question !== state.current) return;
    const flagged = !chosen.every((t) => meta(t) && meta(t).flagged);
    await change({ action: "flag", answers: chosen, flagged });
  });
}

// One answer's student, on the instructor's deliberate request (logged under the grader's
// name by the server); shown in that answer's card only, as text.
async function revealStudent(token) {
  const answer = meta(token);
  if (!answer || !state.reveal) return;
  if (!confirm(`Show the student of answer ${answer.number}? This is recorded in the review log under your name.`)) return;
  const data = await change({ action: "reveal", answer: token });
  if (data && data.student) { state.revealed.set(token, data.student); updateCard(token); }
}

// What changed in an answer since it was graded, drawn as text: removed words struck
// through, added ones underlined.
async function toggleDiff(token) {
  const refs = state.cards.get(token);
  const answer = meta(token);
  if (!refs || !answer || !answer.stale) return;
  if (refs.diff.isConnected) { refs.diff.remove(); return; }
  say("loading the changes…");
  let data;
  try { data = await api(`/api/diff/${state.current}/${token}`); } catch (err) { say("The changes did not load: " + err.message, true); return; }
  const caption = document.createElement("p");
  caption.className = "caption";
  const body = document.createElement("div");
  body.className = "segments";
  if (!data.available) caption.textContent = data.reason;
  else {
    caption.textContent = `Changes since graded (${data.graded_length.toLocaleString()} characters then, ` +
      `${data.length.toLocaleString()} now; struck: removed, underlined: added)` +
      (data.note ? `. ${data.note}` : ":");
    for (const [op, text] of data.segments) {
      let node;
      if (op === "-") node = document.createElement("del");
      else if (op === "+") node = document.createElement("ins");
      else if (op === "…") { node = document.createElement("span"); node.className = "skip"; }
      else { body.append(document.createTextNode(text)); continue; }
      node.textContent = op === "…" ? ` … ${Number(text).toLocaleString()} unchanged characters … ` : text;
      body.append(node);
    }
  }
  refs.diff.replaceChildren(caption, body);
  refs.text.after(refs.diff);
  say(`Answer ${answer.number}: changes since graded shown.`);
}

function editItem(item) {
  const points = prompt(`Points of "${item.comment}" (applied to ${item.uses} answers: their scores change too)`,
                        String(item.points));
  if (points === null) return;
  const comment = prompt("Comment the student reads (empty: delete the item)", item.comment);
  if (comment === null) return;
  if (comment.trim() === "") change({ action: "delete-item", id: item.id, version: item.version });
  else change({ action: "item", id: item.id, version: item.version, points: Number(points), comment: comment });
}

// ------------------------------------------------------------------ drawing

function renderRubric() {
  const list = ui.items;
  list.replaceChildren();
  const focused = meta(state.order[state.focus]);
  state.data.rubric.forEach((item, index) => {
    const li = document.createElement("li");
    li.dataset.item = item.id;
    if (focused && focused.items.includes(item.id)) li.className = "on";
    const apply = document.createElement("button");
    apply.type = "button";
    apply.className = "apply";
    apply.title = state.data.rubric.length > 9 ? `keys ${index + 1} Enter` : `key ${index + 1}`;
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
    const edit = pageButton("edit", "edit", "", () => editItem(item));
    li.append(apply, edit);
    list.appendChild(li);
  });
  ui.selection.textContent = state.selected.size ? `· applies to ${state.selected.size} selected` : "";
}

// A button of the page's own (its label and tooltip are the page's text, never a student's).
function pageButton(className, text, title, onClick) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = className;
  if (text) button.textContent = text;
  if (title) button.title = title;
  button.addEventListener("click", onClick);
  return button;
}

function makeCard(token) {
  const answer = meta(token);
  const refs = {};
  const card = document.createElement("article");
  card.className = "answer";
  card.dataset.token = token;
  card.dataset.number = answer.number;
  const head = document.createElement("h3");
  refs.select = document.createElement("input");
  refs.select.type = "checkbox";
  refs.select.title = "select (x)";
  refs.select.addEventListener("change", () => toggleSelect(token));
  const title = document.createElement("span");
  title.textContent = `Answer ${answer.number} of ${state.all.length}`;
  refs.badge = document.createElement("span");
  refs.flag = document.createElement("span");
  refs.flag.className = "flagmark";
  refs.flag.textContent = "⚑ second look";
  refs.flag.title = "flagged for a second look (f)";
  refs.diffButton = pageButton("changes", "changes since graded", "what changed since the grade was given (d)",
                              () => toggleDiff(token));
  refs.student = document.createElement("span");
  refs.student.className = "student";
  refs.who = pageButton("who", "student?", "show this answer's student (recorded in the review log)",
                       () => revealStudent(token));
  refs.more = pageButton("more", "", "show all (a)", () => showAll(token));
  head.append(refs.select, title, refs.badge, refs.flag, refs.diffButton, refs.student, refs.who, refs.more);
  refs.empty = document.createElement("p");  // in the card only when the answer is empty
  refs.empty.className = "empty";
  refs.empty.textContent = "No answer written.";
  refs.text = document.createElement("div");  // the host of the answer's shadow root
  refs.text.className = "md text";
  refs.diff = document.createElement("div");  // in the card while the changes are shown
  refs.diff.className = "diff";
  refs.notes = document.createElement("p");
  refs.notes.className = "notes";
  refs.chips = document.createElement("div");
  refs.chips.className = "chips";
  const own = document.createElement("div");
  own.className = "own";
  refs.comment = document.createElement("textarea");
  refs.comment.placeholder = "your comment to this student (saved when you leave the box)";
  refs.comment.dataset.field = "comment";
  refs.comment.addEventListener("change", () => {
    const comment = refs.comment.value;
    inTurn(async () => {
      const body = await gradeBody([token], { comment });
      if (body) await change(body);
    });
  });
  refs.adjust = document.createElement("input");
  refs.adjust.type = "number";
  refs.adjust.step = "0.5";
  refs.adjust.title = "points added or removed beyond the rubric";
  refs.adjust.dataset.field = "adjustment";
  refs.adjust.addEventListener("change", () => {
    const adjustment = Number(refs.adjust.value || 0);
    inTurn(async () => {
      const body = await gradeBody([token], { adjustment });
      if (body) await change(body);
    });
  });
  own.append(refs.comment, refs.adjust);
  card.append(head, refs.text, refs.notes, refs.chips, own);
  card.addEventListener("click", (event) => {
    if (event.target.closest("textarea, input, button")) return;
    setFocus(state.order.indexOf(token), false);
  });
  refs.card = card;
  refs.shownHtml = undefined;  // nothing drawn yet
  state.cards.set(token, refs);
  return refs;
}

// Assignments only where the value differs: a card untouched costs the browser no new
// layout (fifty cards of MathML take a while to lay out again).
function put(element, key, value) {
  if (element[key] !== value) element[key] = value;
}

function updateCard(token, textChanged) {
  const refs = state.cards.get(token);
  const answer = meta(token);
  if (!refs || !answer) return;
  const index = state.order.indexOf(token);
  put(refs.card, "className", "answer" + (index === state.focus ? " focused" : "") +
      (state.selected.has(token) ? " selected" : ""));
  put(refs.select, "checked", state.selected.has(token));
  if (answer.stale) { put(refs.badge, "className", "badge stale"); put(refs.badge, "textContent", "answer changed since graded"); }
  else if (answer.graded) { put(refs.badge, "className", "badge done"); put(refs.badge, "textContent", `${answer.score} / ${state.data.points}`); }
  else { put(refs.badge, "className", "badge todo"); put(refs.badge, "textContent", "to grade"); }
  put(refs.flag, "hidden", !answer.flagged);
  put(refs.diffButton, "hidden", !answer.stale);
  if (!answer.stale && refs.diff.isConnected) refs.diff.remove();
  const student = state.revealed.get(token);
  put(refs.who, "hidden", !state.reveal || Boolean(student));
  put(refs.student, "hidden", !student);
  put(refs.student, "textContent", student ? "Student: " + [student.name || student.submission,
    student.student_id, student.email].filter(Boolean).join(", ") : "");
  const shown = state.shown.get(token);
  const empty = Boolean(shown ? shown.empty : answer.empty);
  if (empty && !refs.empty.isConnected) refs.text.before(refs.empty);
  else if (!empty && refs.empty.isConnected) refs.empty.remove();
  put(refs.text, "hidden", Boolean(shown ? shown.empty : answer.empty));
  put(refs.more, "hidden", !answer.truncated || Boolean(shown && shown.full));
  put(refs.more, "textContent", `show all (${answer.length.toLocaleString()} characters)`);
  if (textChanged || refs.shownHtml !== (shown ? shown.html : null)) {
    const root = textRoot(refs.text);
    if (shown) putText(root, shown.html);
    else { const p = document.createElement("p"); p.className = "cut"; p.textContent = "loading…"; root.replaceChildren(p); }
    refs.shownHtml = shown ? shown.html : null;
    if (shown) refs.card.dataset.text = shown.full ? "all" : "shown";
    else delete refs.card.dataset.text;
  }
  put(refs.notes, "hidden", !answer.notes.length);
  put(refs.notes, "textContent", answer.notes.length ? "Note: " + answer.notes.join("; ") : "");
  const chips = answer.items.map(itemById).filter(Boolean)
    .map((item) => `${item.points >= 0 ? "+" : ""}${item.points} ${item.comment}`);
  if (refs.chipsShown !== JSON.stringify(chips)) {
    refs.chips.replaceChildren(...chips.map((text) => {
      const chip = document.createElement("span");
      chip.textContent = text;
      return chip;
    }));
    refs.chipsShown = JSON.stringify(chips);
  }
  if (document.activeElement !== refs.comment) put(refs.comment, "value", answer.comment);
  if (document.activeElement !== refs.adjust) put(refs.adjust, "value", String(answer.adjustment));
}

function renderPage() {
  const tokens = pageTokens();
  const kept = new Set(tokens);
  for (const token of Array.from(state.cards.keys())) if (!kept.has(token)) state.cards.delete(token);
  ui.answers.replaceChildren(...tokens.map((t) => (state.cards.get(t) || makeCard(t)).card));
  tokens.forEach((t) => updateCard(t));
  const pages = Math.max(1, Math.ceil(state.order.length / pageSize()));
  const first = state.page * pageSize();
  const of = state.order.length === state.all.length ? "" : ` (of ${state.all.length})`;
  ui.pageText.textContent = state.order.length
    ? `answers ${first + 1}–${first + tokens.length} of ${state.order.length}${of}, page ${state.page + 1} of ${pages}`
    : (state.all.length ? `no answers shown (of ${state.all.length}): choose another filter` : "no answers");
  ui.pagePrev.disabled = state.page === 0;
  ui.pageNext.disabled = state.page >= pages - 1;
  loadTexts();
}

function render(scroll = true) {
  const data = state.data;
  ui.qTitle.textContent = `${data.id}: ${data.title} (${data.points} points)`;
  if (ui.qPrompt.dataset.question !== data.id) {
    putText(textRoot(ui.qPrompt), data.prompt || "<p>(the released lab's text of this question was not found)</p>");
    putText(textRoot(ui.qModel), data.model || "<p>No model answer: start <code>lablib review</code> with " +
            "<code>--solution</code> (the solution notebook) to see it here.</p>");
    ui.qPrompt.dataset.question = data.id;
  }
  renderRubric();
  renderFilter();
  renderUnreadable();
  renderPage();
  const focused = state.cards.get(state.order[state.focus]);
  if (scroll && focused) focused.card.scrollIntoView({ block: "nearest" });
}

// Notebooks that could not be read: counted and listed apart, not graded here.
function renderUnreadable() {
  const list = state.data.unreadable || [];
  ui.unreadable.hidden = !list.length;
  if (!list.length) { ui.unreadable.replaceChildren(); return; }
  const head = document.createElement("h3");
  head.textContent = `${list.length} notebook${list.length === 1 ? "" : "s"} without an answer to grade here`;
  const hint = document.createElement("p");
  hint.textContent = "They are not among the answers above and cannot be graded here: fix or collect the " +
    "notebook, grade it again (lablib grade ... -o <this folder>), and its answer joins the others.";
  const items = document.createElement("ul");
  for (const entry of list) {
    const li = document.createElement("li");
    li.textContent = `Unreadable ${entry.number}: ${entry.reason}`;
    items.appendChild(li);
  }
  ui.unreadable.replaceChildren(head, hint, items);
}

function setFocus(index, scroll = true) {
  if (index < 0 || index >= state.order.length) return;
  state.focus = index;
  if (pageOf(index) !== state.page) { state.page = pageOf(index); render(scroll); return; }
  pageTokens().forEach((t) => updateCard(t));
  renderRubric();
  const focused = state.cards.get(state.order[index]);
  if (scroll && focused) focused.card.scrollIntoView({ block: "nearest" });
}

function goPage(page) {
  const pages = Math.ceil(state.order.length / pageSize());
  if (page < 0 || page >= pages) return;
  state.page = page;
  state.focus = page * pageSize();
  render();
}

function toggleSelect(token) {
  if (state.selected.has(token)) state.selected.delete(token);
  else state.selected.add(token);
  updateCard(token);
  ui.selection.textContent = state.selected.size ? `· applies to ${state.selected.size} selected` : "";
}

function nextToGrade() {
  const n = state.order.length;
  for (let k = 1; k <= n; k++) {
    const i = (state.focus + k) % n;
    const answer = meta(state.order[i]);
    if (!answer.graded || answer.stale) { setFocus(i); return; }
  }
  say("Every answer to this question is graded.");
}

// Rubric items by number: a digit applies its item at once unless a longer number of an
// item starts with it (12 items: "1" waits for a second digit, Enter or a second's pause).
let digits = "";
let digitTimer = null;

function applyDigits() {
  clearTimeout(digitTimer);
  digitTimer = null;
  const number = Number(digits);
  digits = "";
  if (!state.data) return;
  const item = state.data.rubric[number - 1];
  if (item) toggleItem(item);
  else say(`No rubric item ${number}: this question has ${state.data.rubric.length}.`, true);
}

function typeDigit(digit) {
  const count = state.data.rubric.length;
  if (digits && Number(digits + digit) > count) applyDigits();  // a new number starts
  digits += digit;
  if (Number(digits) === 0) { digits = ""; say("Rubric items are numbered from 1.", true); return; }
  if (Number(digits) * 10 > count) { applyDigits(); return; }
  clearTimeout(digitTimer);
  digitTimer = setTimeout(applyDigits, 1200);
  say(`item ${digits}… (Enter, or the next digit)`);
}

document.addEventListener("keydown", (event) => {
  if (!state.data || event.ctrlKey || event.metaKey || event.altKey) return;
  // keys act unless the grader is typing (a checkbox just clicked keeps the keys)
  const typing = event.target.closest && event.target.closest("textarea, input:not([type=checkbox])");
  if (event.key === "Escape") {
    if (typing) event.target.blur();
    clearTimeout(digitTimer);
    digits = "";
    state.selected.clear();
    pageTokens().forEach((t) => updateCard(t));
    ui.selection.textContent = "";
    return;
  }
  if (typing) return;
  const token = state.order[state.focus];
  if (event.key === "j" || event.key === "ArrowDown") setFocus(state.focus + 1);
  else if (event.key === "k" || event.key === "ArrowUp") setFocus(state.focus - 1);
  else if (event.key === "n") nextToGrade();
  else if (event.key === "x" && token) toggleSelect(token);
  else if (event.key === "u") {
    pageTokens().filter((t) => !meta(t).graded || meta(t).stale).forEach((t) => state.selected.add(t));
    pageTokens().forEach((t) => updateCard(t));
    ui.selection.textContent = state.selected.size ? `· applies to ${state.selected.size} selected` : "";
  } else if (event.key === "a" && token) showAll(token);
  else if (event.key === "c") {
    const refs = state.cards.get(token);
    if (refs) refs.comment.focus();
  } else if (event.key === "[" || event.key === "]") {
    const ids = state.questions.map((q) => q.id);
    const i = ids.indexOf(state.current) + (event.key === "]" ? 1 : -1);
    if (i >= 0 && i < ids.length) openQuestion(ids[i]);
  } else if (event.key === "<" || event.key === ">") goPage(state.page + (event.key === ">" ? 1 : -1));
  else if (event.key === "f") toggleFlag();
  else if (event.key === "d" && token) toggleDiff(token);
  else if (/^[0-9]$/.test(event.key)) typeDigit(event.key);
  else if (event.key === "Enter" && digits) applyDigits();
  else return;
  event.preventDefault();
});

ui.newItem.addEventListener("submit", (event) => {
  event.preventDefault();
  change({ action: "item", points: Number(ui.newPoints.value), comment: ui.newComment.value })
    .then((data) => { if (data) { ui.newPoints.value = ""; ui.newComment.value = ""; } });
});
ui.write.addEventListener("click", () => change({ action: "write" }));
ui.filter.addEventListener("change", () => { applyFilter(ui.filter.value); ui.filter.blur(); });
ui.pagePrev.addEventListener("click", () => goPage(state.page - 1));
ui.pageNext.addEventListener("click", () => goPage(state.page + 1));

// A card's comment or adjustment being edited (saved only when the box is left).
function typing() {
  const field = document.activeElement;
  return !!(field && field.dataset && field.dataset.field);
}

// Every 10 s: what changed since the version this page has (nothing: a few bytes).
async function refresh() {
  if (!state.current || !state.data || state.busy || document.hidden) return;
  const question = state.current;
  const data = await api(`/api/question/${question}/changes?since=${state.version}&generation=${state.generation}`);
  if (question !== state.current || state.busy) return;
  if (data.reload && typing()) {  // a card rebuilt now would drop what is being typed
    say("The answers changed (a regrade or another grader's write): they reload when you leave the box.");
    return;
  }
  if (data.reload) {  // a regrade: the list itself may have changed
    const focusToken = state.order[state.focus];
    takeQuestion(await api("/api/question/" + question));
    const index = state.order.indexOf(focusToken);
    state.focus = index >= 0 ? index : 0;
    state.page = pageOf(state.focus);
    state.cards.clear();
    render(false);
  } else {
    merge(data);
    state.version = data.version;
  }
  await loadQuestions();
}

setInterval(async () => {
  try { await refresh(); } catch (err) { say("The review server does not answer: " + err.message, true); }
}, 10000);

(async () => {
  if (!TOKEN) {
    say("This page needs the address `lablib review` printed (it ends with ?token=...): open that address.", true);
    return;
  }
  try {
    await loadQuestions();
    const wanted = location.hash.slice(1);
    const first = state.questions.find((q) => q.id === wanted) || state.questions[0];
    if (first) await openQuestion(first.id);
  } catch (err) { say(err.message, true); }
})();
