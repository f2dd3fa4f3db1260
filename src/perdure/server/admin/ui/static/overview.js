// The overview page: actor types with their counts, and a search over actors (name, key
// or id substring, awake/asleep) with paging. The search lives in the URL, so a result
// page can be bookmarked and the back button returns to it.
import { api, el, installShortcuts, keyText, showError, timeEl, url } from "./api.js";

const COUNTS_EVERY_MS = 5000;
const PAGE_SIZE = 25;

const form = document.getElementById("search-form");
const nameSelect = document.getElementById("filter-name");
const search = document.getElementById("search");
const statusSelect = document.getElementById("filter-status");
const resultStatus = document.getElementById("result-status");
const problem = document.getElementById("overview-error");
const prev = document.getElementById("page-prev");
const next = document.getElementById("page-next");
const pageNumber = document.getElementById("page-number");

// Cursors of the pages seen so far: cursors[i] fetches page i + 1 (null: the first).
let cursors = [null];
let page = 0;
let nextCursor = null;
let searchSerial = 0;
let lastTypes = null;

function filters() {
  return { name: nameSelect.value, q: search.value.trim(), status: statusSelect.value };
}

function renderTypes(overview) {
  const line = [`${overview.runtime} ${overview.version}`];
  if (overview.node) line.push(`node ${overview.node.id} (${overview.node.address})`);
  document.getElementById("runtime-line").textContent = line.join(" · ");
  const body = document.querySelector("#types tbody");
  // Redraw only on a change, and keep a keyboard user's focus on the same type's link.
  const drawn = JSON.stringify(overview.types);
  if (drawn === lastTypes) return;
  lastTypes = drawn;
  const focused = body.contains(document.activeElement) ? document.activeElement.textContent : null;
  body.replaceChildren(
    ...overview.types.map((type) =>
      el(
        "tr",
        {},
        el("th", { scope: "row" }, el("a", { href: url(`/ui/?name=${encodeURIComponent(type.name)}`), onclick: (e) => pickType(e, type.name) }, type.name)),
        el("td", {}, type.kind),
        el("td", { class: "num" }, type.actors),
        el("td", { class: "num" }, type.awake),
      ),
    ),
  );
  if (focused !== null) [...body.querySelectorAll("a")].find((a) => a.textContent === focused)?.focus();
  const chosen = nameSelect.value;
  const known = new Set([...nameSelect.options].map((o) => o.value));
  for (const type of overview.types) {
    if (!known.has(type.name)) nameSelect.append(el("option", { value: type.name }, type.name));
  }
  nameSelect.value = chosen;
}

function pickType(event, name) {
  event.preventDefault();
  nameSelect.value = name;
  runSearch(true);
}

async function refreshTypes() {
  try {
    renderTypes(await api("GET", "/admin/overview"));
    showError(problem, null);
  } catch (error) {
    showError(problem, error);
  }
}

function actorRow(actor) {
  const href = url(`/ui/actors/${encodeURIComponent(actor.actor_id)}`);
  return el(
    "tr",
    { dataset: { actorId: actor.actor_id } },
    el("th", { scope: "row" }, el("a", { href }, keyText(actor.key))),
    el("td", {}, actor.name),
    el("td", {}, el("code", {}, actor.actor_id)),
    el("td", {}, el("span", { class: `badge status-${actor.awake ? "awake" : "asleep"}` }, actor.awake ? "awake" : "asleep")),
    el("td", {}, timeEl(actor.wake_at)),
    el("td", {}, timeEl(actor.created_at)),
  );
}

async function loadPage() {
  const serial = ++searchSerial;
  const { name, q, status } = filters();
  const params = new URLSearchParams({ status, limit: String(PAGE_SIZE) });
  if (name) params.set("name", name);
  if (q) params.set("q", q);
  if (cursors[page]) params.set("cursor", cursors[page]);
  resultStatus.textContent = "Searching…";
  try {
    const result = await api("GET", `/admin/actors?${params}`);
    if (serial !== searchSerial) return; // a newer search has started
    document.querySelector("#actors tbody").replaceChildren(...result.actors.map(actorRow));
    nextCursor = result.cursor;
    const count = result.actors.length;
    resultStatus.textContent = count === 0 ? "No actors match." : `${count} actor${count === 1 ? "" : "s"} on this page.`;
    showError(problem, null);
  } catch (error) {
    if (serial !== searchSerial) return;
    resultStatus.textContent = "";
    showError(problem, error);
  }
  prev.disabled = page === 0;
  next.disabled = !nextCursor;
  pageNumber.textContent = `Page ${page + 1}`;
}

function runSearch(pushUrl) {
  cursors = [null];
  page = 0;
  if (pushUrl) {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(filters())) if (value && value !== "all") params.set(key, value);
    const query = params.toString();
    history.replaceState(null, "", url(query ? `/ui/?${query}` : "/ui/"));
  }
  return loadPage();
}

function fromUrl() {
  const params = new URLSearchParams(location.search);
  const name = params.get("name") || "";
  if (name && ![...nameSelect.options].some((o) => o.value === name)) nameSelect.append(el("option", { value: name }, name));
  nameSelect.value = name;
  search.value = params.get("q") || "";
  statusSelect.value = ["awake", "asleep"].includes(params.get("status")) ? params.get("status") : "all";
}

let typing = null;
form.addEventListener("submit", (event) => {
  event.preventDefault();
  clearTimeout(typing);
  runSearch(true);
});
search.addEventListener("input", () => {
  clearTimeout(typing);
  typing = setTimeout(() => runSearch(true), 250);
});
nameSelect.addEventListener("change", () => runSearch(true));
statusSelect.addEventListener("change", () => runSearch(true));
prev.addEventListener("click", () => {
  if (page > 0) page -= 1;
  loadPage();
});
next.addEventListener("click", () => {
  if (!nextCursor) return;
  cursors[page + 1] = nextCursor;
  page += 1;
  loadPage();
});

installShortcuts();
fromUrl();
if (location.hash === "#search") search.focus();
refreshTypes();
runSearch(false);
// Counts change as actors wake, sleep and appear; refresh them while the page is seen.
setInterval(() => {
  if (document.visibilityState === "visible") refreshTypes();
}, COUNTS_EVERY_MS);
