// The admin's page: every user's open questions (never what they ask), filtered, refreshed, and cancelled one by one.

import { h } from "./dom.js";

const REFRESH_MS = 5000;
const API = "run/api/admin/questions";

const view = document.getElementById("view");
const refused = document.getElementById("refused");
const filters = document.getElementById("filters");
const status = document.getElementById("status"); // how many, as of when
const notice = document.getElementById("notice"); // what became of the last cancel, until the next
const rows = document.querySelector("#questions tbody");
const auto = document.getElementById("auto");
let loading = null; // the load in flight, so refreshes never overlap

async function errorOf(response) {
  try {
    const body = await response.json();
    return body?.error?.message ?? `The hub answered ${response.status}.`;
  } catch {
    return `The hub answered ${response.status}.`;
  }
}

function refuse(text) {
  view.hidden = true;
  refused.hidden = false;
  refused.textContent = text;
  document.body.dataset.state = "refused";
}

function say(element, text, state = "ok") {
  element.textContent = text;
  element.dataset.state = state;
}

function when(stamp) {
  const date = new Date(stamp);
  return h("time", { datetime: stamp, title: stamp }, date.toLocaleString());
}

function row(question) {
  const label = `Cancel the question ${question.user} was asked by ${question.toolName ?? question.serverId ?? "the hub"}`;
  const cancel = h("button", { type: "button", "aria-label": label }, "Cancel");
  cancel.addEventListener("click", () => cancelQuestion(question, cancel));
  return h(
    "tr",
    { "data-elicitation-id": question.elicitationId },
    h("td", {}, when(question.createdAt)),
    h("td", {}, question.user),
    h("td", {}, question.surface ?? "—"),
    h("td", {}, question.trigger ?? "—"),
    h("td", {}, question.serverId ?? "—"),
    h("td", {}, question.toolName ?? "—"),
    h("td", {}, question.mode),
    h("td", {}, when(question.expiresAt)),
    h("td", {}, cancel),
  );
}

function query() {
  const params = new URLSearchParams();
  for (const [name, value] of new FormData(filters)) {
    if (String(value).trim() !== "") params.set(name, String(value).trim());
  }
  const text = params.toString();
  return text === "" ? API : `${API}?${text}`;
}

async function load() {
  let response;
  try {
    response = await fetch(query(), { headers: { accept: "application/json" } });
  } catch {
    say(status, "The hub cannot be reached.", "error");
    return;
  }
  if (response.status === 401) {
    refuse("Sign in as an admin of this hub to see its open questions.");
    return;
  }
  if (response.status === 403) {
    refuse(`${await errorOf(response)} Only its admins see every user's open questions.`);
    return;
  }
  if (!response.ok) {
    say(status, await errorOf(response), "error");
    return;
  }
  const { questions } = await response.json();
  view.hidden = false;
  rows.replaceChildren(
    ...(questions.length > 0
      ? questions.map(row)
      : [h("tr", {}, h("td", { colspan: "9", class: "empty" }, "No open questions."))]),
  );
  const count = questions.length === 1 ? "1 open question" : `${questions.length} open questions`;
  say(status, `${count} · updated ${new Date().toLocaleTimeString()}`);
  document.body.dataset.ready = "true";
}

/** Load the list, unless a load is in flight already (then that one). */
function refresh() {
  loading ??= load().finally(() => {
    loading = null;
  });
  return loading;
}

/** Load the list anew, after any load in flight (which may have started before a change). */
async function reload() {
  if (loading !== null) await loading;
  return refresh();
}

async function cancelQuestion(question, button) {
  button.disabled = true;
  let response;
  try {
    response = await fetch(`${API}/${encodeURIComponent(question.elicitationId)}/cancel`, { method: "POST" });
  } catch {
    say(notice, "The hub cannot be reached.", "error");
    button.disabled = false;
    return;
  }
  if (response.ok) say(notice, `Cancelled a question of ${question.user}'s.`);
  else say(notice, `Not cancelled: ${await errorOf(response)}`, "error");
  await reload();
}

async function who() {
  const element = document.getElementById("who");
  try {
    const { user } = await (await fetch("run/api/me")).json();
    element.textContent = user ? `Signed in as ${user}` : "Not signed in";
  } catch {
    element.textContent = "The hub cannot be reached.";
  }
}

filters.addEventListener("submit", (event) => {
  event.preventDefault();
  refresh();
});
document.getElementById("refresh").addEventListener("click", () => refresh());
setInterval(() => {
  if (auto.checked && refused.hidden) refresh();
}, REFRESH_MS);
who();
refresh();
