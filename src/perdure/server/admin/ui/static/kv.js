// The actor page's KV card (docs/storage.md): the actor's committed KV records in key
// order, a page at a time (GET /admin/actors/{id}/kv), filtered by a key prefix. Read from
// the store: looking does not wake the actor. Read again with the page's other data when
// the live feed reports a change, and on Reload (KV writes alone are not on the feed).
import { api, brief, el, showError } from "./api.js";

const PAGE_SIZE = 50;

/** A record's key as written by actor code: a string as is, bytes as their JSON form. */
function keyLabel(key) {
  return typeof key === "string" ? key : JSON.stringify(key);
}

function recordRow(record) {
  return el(
    "tr",
    {},
    el("td", {}, el("code", {}, keyLabel(record.key))),
    el("td", {}, el("code", { class: "block", title: JSON.stringify(record.value) }, brief(record.value, 160))),
    el("td", { class: "num" }, String(record.size)),
  );
}

export class KvCard {
  /** `base`: the actor's admin path; `$`: the page's getElementById. */
  constructor(base, $) {
    this.base = base;
    this.$ = $;
    this.prefix = "";
    this.cursors = [null]; // the cursor each page was read from (page 1: the start)
    this.page = 0;
    this.next = null;
    this.drawn = null;
    $("kv-filter").addEventListener("submit", (event) => {
      event.preventDefault();
      this.prefix = $("kv-prefix").value;
      this.cursors = [null];
      this.page = 0;
      this.load();
    });
    // A commit that writes KV records alone sends nothing on the live feed: read again.
    $("kv-reload").addEventListener("click", () => this.load());
    $("kv-prev").addEventListener("click", () => {
      if (this.page === 0) return;
      this.page -= 1;
      this.load();
    });
    $("kv-next").addEventListener("click", () => {
      if (!this.next) return;
      this.cursors[this.page + 1] = this.next;
      this.page += 1;
      this.load();
    });
  }

  /** Read the current page again (after a change, or when the filter or page moves). */
  async load() {
    const $ = this.$;
    const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
    if (this.prefix) query.set("prefix", this.prefix);
    const cursor = this.cursors[this.page];
    if (cursor) query.set("after", cursor);
    let result;
    try {
      result = await api("GET", `${this.base}/kv?${query}`);
    } catch (error) {
      showError($("kv-error"), error);
      return;
    }
    showError($("kv-error"), null);
    this.next = result.next;
    const drawn = JSON.stringify(result.records);
    if (drawn !== this.drawn) {
      this.drawn = drawn;
      $("kv").querySelector("tbody").replaceChildren(...result.records.map(recordRow));
    }
    $("kv-empty").hidden = result.records.length > 0;
    $("kv-page").textContent = `Page ${this.page + 1}`;
    $("kv-prev").disabled = this.page === 0;
    $("kv-next").disabled = !this.next;
  }
}
