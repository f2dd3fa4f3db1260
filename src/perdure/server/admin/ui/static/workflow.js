// The workflow history table of the actor page. Rows are keyed by entry location and kept
// in recording order (seq), so the live feed's changed entries can be patched in place:
// an update replaces its row, a new entry is inserted where it belongs, a deleted one goes.
import { brief, el, timeEl, url } from "./api.js";

/** An entry error as text: "group.code: message" when it has a code, else the message. */
export function errorText(error) {
  if (!error) return "";
  const label = error.group && error.code ? `${error.group}.${error.code}: ` : error.name ? `${error.name}: ` : "";
  return `${label}${error.message ?? JSON.stringify(error)}`;
}

/** An error a retry set aside, with the attempts it had taken. */
function pastError(error) {
  const attempts = error.attempts ? ` (${error.attempts} attempt${error.attempts === 1 ? "" : "s"})` : "";
  return el("li", {}, errorText(error), attempts);
}

function detailCell(entry) {
  const cell = el("td", { class: "detail" });
  if (entry.error) cell.append(el("div", { class: "entry-error" }, errorText(entry.error)));
  const past = entry.errors || [];
  if (past.length) {
    cell.append(
      el(
        "details",
        { class: "past-errors" },
        el("summary", {}, `${past.length} earlier error${past.length === 1 ? "" : "s"}`),
        el("ol", {}, past.map(pastError)),
      ),
    );
  }
  // One line of facts: the location already says which iteration an entry belongs to.
  const facts = [];
  if (entry.iterations !== null && entry.iterations !== undefined) facts.push(`${entry.iterations} iteration${entry.iterations === 1 ? "" : "s"}`);
  if (entry.retry_at) facts.push(el("span", {}, "retry at ", timeEl(entry.retry_at)));
  if (entry.deadline) facts.push(el("span", {}, "until ", timeEl(entry.deadline)));
  for (const message of entry.messages || []) {
    facts.push(el("code", { title: JSON.stringify(message.body) }, `${message.name} #${message.id} ${brief(message.body, 48)}`));
  }
  if (entry.child_id) {
    facts.push(el("a", { href: url(`/ui/actors/${encodeURIComponent(entry.child_id)}`), title: "The child workflow" }, `child ${entry.child_id}`));
  }
  if (entry.output !== null && entry.output !== undefined) {
    facts.push(el("code", { title: JSON.stringify(entry.output) }, `→ ${brief(entry.output, 48)}`));
  }
  if (facts.length) cell.append(el("div", { class: "facts" }, facts));
  return cell;
}

function entryRow(entry, onReplay, onFork) {
  const where = el("td", { class: "where" }, el("span", { class: "entry-name" }, entry.name));
  if (entry.location !== entry.name) where.append(el("span", { class: "loc" }, entry.location));
  where.style.setProperty("--depth", String(entry.depth || 0));
  const replay = el(
    "button",
    { type: "button", class: "small quiet", "aria-label": `Replay from ${entry.location}`, title: "Replay the workflow from this entry", onclick: () => onReplay(entry) },
    "Replay",
  );
  const fork = el(
    "button",
    { type: "button", class: "small quiet", "aria-label": `Fork from ${entry.location}`, title: "Start a new run from this entry, keeping this one for the record", onclick: () => onFork(entry) },
    "Fork",
  );
  return el(
    "tr",
    { dataset: { location: entry.location, seq: String(entry.seq), status: entry.status } },
    el("td", { class: "num" }, entry.seq),
    where,
    el("td", {}, entry.kind),
    el("td", {}, el("span", { class: `badge status-${entry.status}` }, entry.status)),
    el("td", { class: "num" }, entry.attempts ?? ""),
    detailCell(entry),
    el("td", { class: "ops" }, replay, fork),
  );
}

export class HistoryTable {
  /** `onReplay(entry)` and `onFork(entry)` run when an entry's replay or fork button is
   *  pressed. */
  constructor(tbody, emptyNote, onReplay, onFork) {
    this.tbody = tbody;
    this.emptyNote = emptyNote;
    this.onReplay = onReplay;
    this.onFork = onFork;
    this.rows = new Map(); // location → {row, seq, json}
  }

  /** Insert or update `entries`; returns how many rows changed. */
  upsert(entries) {
    let changed = 0;
    for (const entry of entries) {
      const json = JSON.stringify(entry);
      const known = this.rows.get(entry.location);
      if (known && known.json === json) continue;
      const row = entryRow(entry, this.onReplay, this.onFork);
      const hadFocus = known && known.row.contains(document.activeElement);
      if (known) known.row.remove();
      this.tbody.insertBefore(row, this.rowAfter(entry.seq));
      this.rows.set(entry.location, { row, seq: entry.seq, json });
      if (hadFocus) row.querySelector("button").focus();
      row.classList.add("fresh");
      setTimeout(() => row.classList.remove("fresh"), 1500);
      changed += 1;
    }
    this.updateEmpty();
    return changed;
  }

  /** Remove the entries at `locations`. */
  remove(locations) {
    for (const location of locations) {
      const known = this.rows.get(location);
      if (!known) continue;
      known.row.remove();
      this.rows.delete(location);
    }
    this.updateEmpty();
  }

  /** Make the table show exactly `history` (a full snapshot). */
  reconcile(history) {
    const present = new Set(history.map((entry) => entry.location));
    this.remove([...this.rows.keys()].filter((location) => !present.has(location)));
    return this.upsert(history);
  }

  /** The first row recorded after `seq` (null: append). New entries usually go last. */
  rowAfter(seq) {
    const rows = this.tbody.rows;
    if (rows.length === 0 || Number(rows[rows.length - 1].dataset.seq) < seq) return null;
    return [...rows].find((row) => Number(row.dataset.seq) > seq) || null;
  }

  updateEmpty() {
    this.emptyNote.hidden = this.rows.size > 0;
  }
}
