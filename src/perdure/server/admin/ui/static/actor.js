// The actor page: summary, state, workflow history, queue, schedules, connections and the
// operations, kept live by the actor's event feed (Server-Sent Events), which opens with a
// snapshot of the actor. Feed events patch what they carry (state, workflow entries and
// status, awake) at once; what the feed only hints at (queue, schedules, connections, next
// alarm) is refetched, debounced.
import { ApiError, api, badge, brief, duration, el, installShortcuts, keyText, parseJson, pretty, showError, timeEl, url } from "./api.js";
import { KvCard } from "./kv.js";
import { HistoryTable, errorText } from "./workflow.js";

const REFRESH_DELAY_MS = 300;
const REOPEN_DELAY_MS = 3000;
const MAX_EVENTS = 50;
const ANNOUNCE_EVERY_MS = 2000;

const $ = (id) => document.getElementById(id);
const actorId = $("actor").dataset.actorId;
const base = `/admin/actors/${encodeURIComponent(actorId)}`;

let gone = false; // destroyed, or never existed
let feed = null;
let typeName = null;

const kv = new KvCard(base, $);
const history = new HistoryTable(document.querySelector("#history tbody"), $("history-empty"), replayFrom, forkFrom);

// Screen readers hear the latest change at most every ANNOUNCE_EVERY_MS, not each one.
let announcement = null;
let announceTimer = null;

function announce(text) {
  announcement = text;
  if (announceTimer !== null) return;
  $("announce").textContent = announcement;
  announceTimer = setTimeout(() => {
    announceTimer = null;
    if ($("announce").textContent !== announcement) announce(announcement);
  }, ANNOUNCE_EVERY_MS);
}

// ---- rendering ------------------------------------------------------------------------

function renderActor(actor) {
  const title = `${actor.name} · ${keyText(actor.key)}`;
  $("actor-title").textContent = title;
  $("crumb").textContent = title;
  document.title = `${title} · perdure inspector`;
  $("s-name").textContent = actor.name;
  $("s-key").textContent = keyText(actor.key);
  $("s-created").replaceChildren(timeEl(actor.created_at));
  $("s-alarm").replaceChildren(timeEl(actor.wake_at));
  renderAwake(actor.awake);
  if (typeName !== actor.name) {
    typeName = actor.name;
    loadTypeInfo();
  }
}

function renderAwake(awake) {
  badge($("awake"), awake ? "awake" : "asleep");
}

function renderState(state) {
  $("state").textContent = pretty(state);
}

function renderWorkflowStatus(workflow) {
  badge($("wf-status"), workflow.status);
  $("wf-retry").hidden = workflow.status !== "failed";
  const live = ["pending", "running", "paused"].includes(workflow.status);
  $("wf-cancel").hidden = !live;
  $("wf-pause").hidden = !["pending", "running"].includes(workflow.status);
  $("wf-resume").hidden = workflow.status !== "paused";
  if ("error" in workflow) {
    $("wf-error").hidden = !workflow.error;
    $("wf-error").textContent = workflow.error ? errorText(workflow.error) : "";
  }
  if ("output" in workflow) {
    const done = workflow.status === "completed";
    $("wf-output-box").hidden = !done;
    $("wf-output").textContent = done ? pretty(workflow.output) : "";
  }
}

/** The page of another actor (a parent or a child workflow). */
function actorLink(link) {
  return el("a", { href: url(`/ui/actors/${encodeURIComponent(link.actor_id)}`) }, `${link.name} ${keyText(link.key)}`);
}

function renderFamily(workflow) {
  const parent = workflow.parent;
  $("wf-parent").hidden = !parent;
  if (parent) {
    $("wf-parent-link").replaceWith(Object.assign(actorLink(parent), { id: "wf-parent-link" }));
    $("wf-parent-at").textContent = `at ${parent.location}${parent.detached ? " (detached)" : ""}`;
  }
  const children = (workflow.children || []).filter((child) => child.actor_id);
  $("wf-children-box").hidden = !children.length;
  $("wf-children-count").textContent = `(${children.length})`;
  $("wf-children").replaceChildren(
    ...children.map((child) =>
      el(
        "li",
        {},
        actorLink(child),
        " ",
        el("span", { class: `badge status-${child.status}` }, child.status),
        el("span", { class: "muted" }, ` at ${child.location}${child.detached ? " · detached" : ""}`),
      ),
    ),
  );
}

function renderWorkflow(workflow) {
  $("workflow").hidden = !workflow;
  if (!workflow) return;
  renderWorkflowStatus(workflow);
  if ("children" in workflow) renderFamily(workflow);
  history.reconcile(workflow.history);
}

const drawnLists = new Map(); // list id → the JSON it shows
const openHistories = new Set(); // schedules whose fire history the user opened

/** Fill the list `#name` (with its `#name-count` and `#name-empty` companions). A redraw
 *  keeps the keyboard focus on the same control (found by its aria-label). */
function listInto(name, items, render) {
  const list = $(name);
  const drawn = JSON.stringify(items);
  if (drawnLists.get(name) === drawn) return;
  drawnLists.set(name, drawn);
  const focused = list.contains(document.activeElement) ? document.activeElement.getAttribute("aria-label") : null;
  list.replaceChildren(...items.map(render));
  if (focused) list.querySelector(`[aria-label="${CSS.escape(focused)}"]`)?.focus();
  $(`${name}-count`).textContent = items.length ? `(${items.length})` : "";
  $(`${name}-empty`).hidden = items.length > 0;
}

function renderQueue(queue) {
  listInto("queue", queue, (message) =>
    el(
      "li",
      {},
      el("strong", {}, message.name),
      ` #${message.id} `,
      message.held ? el("span", { class: "badge status-held" }, "held") : null,
      message.due_at && message.due_at > Date.now()
        ? el("span", { class: "badge status-held", title: "A delayed send: receivers get it from then on" }, "due ", timeEl(message.due_at))
        : message.visible_at && message.visible_at > Date.now()
          ? el("span", { class: "badge status-held", title: "Leased or given back with a delay" }, `hidden, attempt ${message.attempts}`)
          : null,
      " ",
      timeEl(message.created_at),
      el("code", { class: "block", title: JSON.stringify(message.body) }, brief(message.body, 120)),
    ),
  );
}

/** A limited queue (docs/queues.md, "Concurrency and rate limits"): its declaration,
 * and the keys with the most in progress (the admin API lists at most 50). */
function limitItem([name, limit]) {
  const per = limit.key ? ` per ${limit.key}` : "";
  const rules = [
    limit.concurrency ? `${limit.concurrency} in progress` : null,
    limit.rate ? `${limit.rate.limit} per ${limit.rate.period} s` : null,
  ].filter(Boolean);
  return el(
    "li",
    { dataset: { queue: name } },
    el("div", { class: "row" }, el("strong", {}, name), ` at most ${rules.join(", ")}${per}`),
    el("div", { class: "muted" }, `${limit.in_progress} in progress · ${limit.keys_total} keys busy`),
    limit.keys.length
      ? el(
          "table",
          { class: "grid compact" },
          el("thead", {}, el("tr", {}, ["Key", "In progress", "Started in window"].map((h) => el("th", { scope: "col" }, h)))),
          el(
            "tbody",
            {},
            limit.keys.map((key) => el("tr", {}, el("td", {}, el("code", {}, key.key || "(all)")), el("td", { class: "num" }, String(key.in_progress)), el("td", { class: "num" }, String(key.started)))),
          ),
        )
      : null,
  );
}

/** A dead letter (docs/queues.md), with its Requeue and Drop buttons. */
function deadLetterItem(letter) {
  const label = `dead letter ${letter.id}`;
  return el(
    "li",
    { dataset: { messageId: String(letter.id) } },
    el(
      "div",
      { class: "row" },
      el("strong", {}, letter.queue),
      ` #${letter.id} `,
      el("span", { class: "badge status-failed" }, `${letter.attempts} attempts`),
      el("span", { class: "spacer" }),
      el("button", { type: "button", class: "small", "aria-label": `Requeue ${label}`, onclick: () => requeueDeadLetter(letter) }, "Requeue"),
      el("button", { type: "button", class: "small danger", "aria-label": `Drop ${label}`, onclick: () => dropDeadLetter(letter) }, "Drop"),
    ),
    el("div", { class: "muted" }, "died ", timeEl(letter.dead_at), " · sent ", timeEl(letter.created_at)),
    letter.error ? el("div", { class: "dead-reason" }, letter.error) : null,
    el("code", { class: "block", title: JSON.stringify(letter.body) }, brief(letter.body, 120)),
  );
}

function cadence(schedule) {
  if (schedule.kind === "cron") return `cron ${schedule.expression} (${schedule.timezone || "UTC"})`;
  if (schedule.kind === "every") return `every ${duration(schedule.interval_ms)}`;
  return "once";
}

function fireRow(fire) {
  return el(
    "tr",
    {},
    el("td", { class: "num" }, fire.seq),
    el("td", {}, timeEl(fire.scheduled_at)),
    el("td", {}, timeEl(fire.fired_at)),
    el("td", {}, el("span", { class: `badge status-${fire.result}` }, fire.result)),
    el("td", {}, fire.error ? errorText(fire.error) : ""),
  );
}

function scheduleItem(schedule) {
  const label = schedule.name || schedule.id;
  const fires = schedule.history || [];
  const cancel = el("button", { type: "button", class: "small", "aria-label": `Cancel schedule ${label}`, onclick: () => cancelSchedule(schedule, label) }, "Cancel");
  return el(
    "li",
    { dataset: { scheduleId: schedule.id } },
    el("div", { class: "row" }, el("strong", {}, label), el("span", { class: "badge" }, schedule.kind), el("span", { class: "spacer" }), cancel),
    el("div", {}, el("code", {}, `${schedule.action}(${brief(schedule.args, 60).slice(1, -1)})`), ` · ${cadence(schedule)}`),
    el("div", { class: "muted" }, "next ", timeEl(schedule.run_at), " · last ", timeEl(schedule.last_run_at)),
    fires.length
      ? el(
          "details",
          { open: openHistories.has(schedule.id), ontoggle: (event) => (event.target.open ? openHistories.add(schedule.id) : openHistories.delete(schedule.id)) },
          el("summary", { "aria-label": `Fire history of ${label}` }, `Fire history (${fires.length})`),
          el(
            "table",
            { class: "grid compact" },
            el("thead", {}, el("tr", {}, ["#", "Scheduled", "Fired", "Result", "Error"].map((h) => el("th", { scope: "col" }, h)))),
            el("tbody", {}, fires.slice().reverse().map(fireRow)),
          ),
        )
      : null,
  );
}

function renderConnections(connections) {
  listInto("connections", connections, (conn) =>
    el(
      "li",
      {},
      el("code", {}, conn.id),
      conn.subscriptions.length ? ` · subscribed to ${conn.subscriptions.join(", ")}` : "",
      el("div", { class: "muted" }, `params ${brief(conn.params, 60)} · state ${brief(conn.state, 60)}`),
    ),
  );
}

function renderSnapshot(data) {
  if (!gone) showError($("banner"), null); // whatever failed before, the actor is back
  renderActor(data.actor);
  renderState(data.state);
  renderWorkflow(data.workflow);
  renderQueue(data.queue);
  const limits = Object.entries(data.limits || {});
  $("limits-card").hidden = limits.length === 0;
  listInto("limits", limits, limitItem);
  listInto("dead-letters", data.dead_letters || [], deadLetterItem);
  listInto("schedules", data.schedules, scheduleItem);
  renderConnections(data.connections);
  kv.load(); // its own request (paged); a change the feed reported may have written records
}

// ---- loading ----------------------------------------------------------------------------

let refreshTimer = null;
let refreshing = null;

async function loadSnapshot() {
  try {
    renderSnapshot(await api("GET", base));
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) markGone(`${error.identifier}: ${error.message}`);
    else showError($("banner"), error);
  }
}

/** Refetch the snapshot soon; calls in a burst of feed events share one request. */
function scheduleRefresh(delay = REFRESH_DELAY_MS) {
  if (gone || refreshTimer !== null) return;
  refreshTimer = setTimeout(async () => {
    if (refreshing) await refreshing;
    refreshTimer = null;
    refreshing = loadSnapshot();
    await refreshing;
    refreshing = null;
  }, delay);
}

async function loadTypeInfo() {
  try {
    const overview = await api("GET", "/admin/overview");
    const type = overview.types.find((t) => t.name === typeName);
    if (!type) return;
    $("action-names").replaceChildren(...type.actions.map((name) => el("option", { value: name })));
    $("queue-names").replaceChildren(...type.queues.map((name) => el("option", { value: name })));
  } catch {
    // Only suggestions for the forms: the page works without them.
  }
}

// ---- the live feed ---------------------------------------------------------------------

function setFeedState(text, live) {
  $("feed-state").textContent = text;
  $("feed-state").classList.toggle("live", live);
}

function onFeed(type, handler) {
  feed.addEventListener(type, (message) => {
    try {
      handler(JSON.parse(message.data));
    } catch (error) {
      console.error(`bad ${type} event`, error);
    }
  });
}

function openFeed() {
  if (gone) return;
  feed = new EventSource(url(`${base}/feed`));
  // Every (re)opened feed starts with a `snapshot` of the actor, then sends changes.
  feed.addEventListener("open", () => setFeedState("live", true));
  feed.addEventListener("error", () => {
    if (gone) return;
    if (feed.readyState === EventSource.CLOSED) {
      // Refused (not found, signed out…) or broken: the snapshot says why; try again later.
      setFeedState("disconnected", false);
      loadSnapshot();
      setTimeout(openFeed, REOPEN_DELAY_MS);
    } else {
      setFeedState("reconnecting…", false);
    }
  });
  onFeed("snapshot", (data) => {
    if (data.destroyed) markGone("This actor was destroyed.");
    else renderSnapshot(data);
  });
  // The feed fell behind and is closing: the browser reopens it, with a new snapshot.
  onFeed("resync", () => setFeedState("catching up…", false));
  onFeed("state", (data) => {
    renderState(data.state);
    announce("State changed.");
    scheduleRefresh(); // what changed it may show elsewhere: a schedule's fire, the queue
  });
  onFeed("event", addEvent);
  onFeed("workflow", (data) => {
    $("workflow").hidden = false;
    renderWorkflowStatus(data);
    history.remove(data.deleted || []);
    const changed = history.upsert(data.history || []);
    announce(`Workflow ${data.status}; ${changed} history entr${changed === 1 ? "y" : "ies"} changed.`);
    scheduleRefresh(); // the queue the workflow consumed from, the next alarm
  });
  onFeed("connection", () => scheduleRefresh());
  onFeed("lifecycle", (data) => {
    if (data.destroyed) {
      markGone("This actor was destroyed.");
      return;
    }
    renderAwake(data.awake);
    scheduleRefresh();
  });
}

function addEvent(data) {
  const list = $("events");
  list.prepend(el("li", {}, timeEl(Date.now()), " ", el("strong", {}, data.name), " ", el("code", {}, brief(data.args, 100))));
  while (list.children.length > MAX_EVENTS) list.lastElementChild.remove();
  $("events-empty").hidden = true;
}

/** The actor no longer exists: say so, stop the feed, disable the operations. */
function markGone(message) {
  gone = true;
  if (feed) feed.close();
  setFeedState("closed", false);
  const banner = $("banner");
  banner.replaceChildren(message, " ", el("a", { href: url("/ui/") }, "Back to the actor list"));
  banner.hidden = false;
  for (const control of document.querySelectorAll(".columns button, .columns input, .columns textarea")) control.disabled = true;
  announce(message);
}

// ---- operations -------------------------------------------------------------------------

const dialog = $("confirm");

/** Ask in a modal dialog; resolves true only for the confirm button. */
function confirmDialog(title, text, okLabel) {
  const opener = document.activeElement;
  $("confirm-title").textContent = title;
  $("confirm-text").textContent = text;
  $("confirm-ok").textContent = okLabel;
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => {
        if (opener instanceof HTMLElement && opener.isConnected) opener.focus();
        resolve(dialog.returnValue === "ok");
      },
      { once: true },
    );
    dialog.showModal();
  });
}

/** Run `call` with `button` disabled, showing an error in `errorBox` if it fails. */
async function operate(button, errorBox, call) {
  showError(errorBox, null);
  button.disabled = true;
  try {
    return await call();
  } catch (error) {
    showError(errorBox, error);
    return undefined;
  } finally {
    button.disabled = gone;
  }
}

/** Wire the form `#id`: `call()` makes the request, `describe(answer)` is what to show. */
function operationForm(id, call, describe) {
  const form = $(id);
  const button = form.querySelector("button[type=submit]");
  const errorBox = form.querySelector(".error");
  const result = form.querySelector(".result");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    result.hidden = true;
    const answer = await operate(button, errorBox, call);
    if (answer === undefined) return;
    result.textContent = describe(answer);
    result.hidden = false;
    scheduleRefresh();
  });
}

operationForm(
  "action-form",
  () => {
    const args = parseJson($("action-args").value, "Arguments");
    if (!Array.isArray(args)) throw new Error("Arguments must be a JSON array, e.g. [1, \"two\"].");
    const name = $("action-name").value.trim();
    return api("POST", `${base}/actions/${encodeURIComponent(name)}`, { args });
  },
  (answer) => `→ ${pretty(answer.output)}`,
);

operationForm(
  "queue-form",
  () => {
    const body = parseJson($("queue-body").value, "Body");
    const wait = $("queue-wait").checked;
    const name = $("queue-name").value.trim();
    return api("POST", `${base}/queues/${encodeURIComponent(name)}`, { body, wait, timeout: wait ? 30 : null });
  },
  (answer) => (answer.response === undefined || answer.response === null ? answer.status : `${answer.status} → ${pretty(answer.response)}`),
);

$("wf-retry").addEventListener("click", async (event) => {
  const answer = await operate(event.currentTarget, $("wf-op-error"), () => api("POST", `${base}/workflow/retry`));
  if (answer === undefined) return;
  renderWorkflowStatus(answer.workflow);
  announce(`Workflow retried: ${answer.workflow.status}.`);
  scheduleRefresh();
});

async function control(button, kind, body) {
  const answer = await operate(button, $("wf-op-error"), () => api("POST", `${base}/workflow/${kind}`, body));
  if (answer === undefined) return;
  renderWorkflowStatus(answer.workflow);
  announce(`Workflow ${kind}: ${answer.workflow.status}.`);
  scheduleRefresh();
}

$("wf-pause").addEventListener("click", (event) => control(event.currentTarget, "pause"));
$("wf-resume").addEventListener("click", (event) => control(event.currentTarget, "resume"));
$("wf-cancel").addEventListener("click", async (event) => {
  const button = event.currentTarget;
  const ok = await confirmDialog(
    "Cancel the workflow?",
    "The run stops at its next durable point: its compensations run and it ends cancelled. This cannot be undone.",
    "Cancel workflow",
  );
  if (ok) await control(button, "cancel", { reason: "cancelled in the inspector" });
});

async function replayFrom(entry) {
  const later = [...document.querySelectorAll("#history tbody tr")].filter((row) => Number(row.dataset.seq) > entry.seq).length;
  const ok = await confirmDialog(
    "Replay the workflow?",
    `The entry ${entry.location} and the ${later} entr${later === 1 ? "y" : "ies"} recorded after it are deleted, and the workflow runs again from there.`,
    "Replay",
  );
  if (!ok) return;
  const answer = await operate($("wf-retry"), $("wf-op-error"), () => api("POST", `${base}/workflow/replay`, { from: entry.location }));
  if (answer === undefined) return;
  renderWorkflowStatus(answer.workflow);
  announce(`Workflow replayed from ${entry.location}: ${answer.workflow.status}.`);
  scheduleRefresh();
}

/** Ask for a fork's new input (empty: the run's own) in the fork dialog; null if cancelled. */
function forkDialog(location) {
  const box = $("fork");
  const opener = document.activeElement;
  $("fork-text").textContent = `A new run starts from ${location}; the current run and its history are kept for the record.`;
  $("fork-input").value = "";
  box.returnValue = "";
  return new Promise((resolve) => {
    box.addEventListener(
      "close",
      () => {
        if (opener instanceof HTMLElement && opener.isConnected) opener.focus();
        resolve(box.returnValue === "ok" ? $("fork-input").value : null);
      },
      { once: true },
    );
    box.showModal();
  });
}

async function forkFrom(entry) {
  const text = await forkDialog(entry.location);
  if (text === null) return;
  const body = { from: entry.location };
  try {
    if (text.trim() !== "") body.input = parseJson(text, "The new input");
  } catch (error) {
    showError($("wf-op-error"), error);
    return;
  }
  const answer = await operate($("wf-retry"), $("wf-op-error"), () => api("POST", `${base}/workflow/fork`, body));
  if (answer === undefined) return;
  renderWorkflowStatus(answer.workflow);
  announce(`Workflow forked from ${entry.location}: run ${answer.run}, ${answer.workflow.status}.`);
  scheduleRefresh();
}

async function cancelSchedule(schedule, label) {
  const item = document.querySelector(`#schedules li[data-schedule-id="${CSS.escape(schedule.id)}"]`);
  const answer = await operate(item.querySelector("button"), $("sched-error"), () => api("DELETE", `${base}/schedules/${encodeURIComponent(schedule.id)}`));
  if (answer === undefined) return;
  announce(`Schedule ${label} cancelled.`);
  scheduleRefresh(0);
}

async function requeueDeadLetter(letter) {
  const button = document.querySelector(`[aria-label="Requeue dead letter ${letter.id}"]`);
  const answer = await operate(button, $("dead-error"), () => api("POST", `${base}/dead-letters/${letter.id}/requeue`));
  if (answer === undefined) return;
  announce(`Dead letter ${letter.id} requeued to ${letter.queue}.`);
  scheduleRefresh(0);
}

async function dropDeadLetter(letter) {
  const ok = await confirmDialog(
    "Drop this dead letter?",
    `Message #${letter.id} of queue ${letter.queue} is deleted for good. This cannot be undone.`,
    "Drop",
  );
  if (!ok) return;
  const button = document.querySelector(`[aria-label="Drop dead letter ${letter.id}"]`);
  const answer = await operate(button, $("dead-error"), () => api("DELETE", `${base}/dead-letters/${letter.id}`));
  if (answer === undefined) return;
  announce(`Dead letter ${letter.id} dropped.`);
  scheduleRefresh(0);
}

$("destroy").addEventListener("click", async (event) => {
  const button = event.currentTarget;
  const ok = await confirmDialog(
    "Destroy this actor?",
    `${$("actor-title").textContent} (${actorId}) will run on_destroy and lose its state, queue, schedules and workflow history. This cannot be undone.`,
    "Destroy",
  );
  if (!ok) return;
  const answer = await operate(button, $("destroy-error"), () => api("DELETE", base));
  if (answer !== undefined) markGone("This actor was destroyed.");
});

installShortcuts();
openFeed();
