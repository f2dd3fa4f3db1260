// The actor page's SQL database card (c.db; docs/inspector.md): the tables and views with
// their columns (GET /admin/actors/{id}/db/tables), a table's rows a page at a time
// (.../db/tables/{name}/rows), and a query box that only reads (POST .../db/query). Read
// from the store as committed: looking does not wake the actor. Read when the page opens
// and on Reload, not at each change the feed reports: each look reads the whole committed
// file (about 3 ms per MB, bench/README.md). Values are user data:
// everything goes in as text (el), never as HTML.
import { api, brief, el, showError } from "./api.js";

const PAGE_SIZE = 50;

/** A cell: text as it is, anything else (numbers, null, a blob's JSON form) as JSON. */
function cell(value) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return el("td", { title: text.length > 120 ? text : null }, el("code", {}, text.length > 120 ? `${text.slice(0, 119)}…` : text));
}

function columnText(column) {
  const parts = [column.name, column.type];
  if (column.pk) parts.push("PRIMARY KEY");
  if (column.notnull) parts.push("NOT NULL");
  if (column.default !== null) parts.push(`DEFAULT ${brief(column.default, 40)}`);
  return parts.filter(Boolean).join(" ");
}

/** Draw `{columns, rows}` into the table `target`. */
function drawRows(target, result) {
  target.querySelector("thead").replaceChildren(el("tr", {}, result.columns.map((name) => el("th", { scope: "col" }, name))));
  target.querySelector("tbody").replaceChildren(...result.rows.map((row) => el("tr", {}, row.map(cell))));
}

export class DbCard {
  /** `base`: the actor's admin path; `$`: the page's getElementById. */
  constructor(base, $) {
    this.base = base;
    this.$ = $;
    this.table = null; // the table whose rows are shown
    this.offset = 0;
    this.total = 0;
    this.loaded = false; // read once when the page opens; again on Reload
    $("db-reload").addEventListener("click", () => this.load());
    $("db-prev").addEventListener("click", () => this.showRows(this.table, Math.max(0, this.offset - PAGE_SIZE)));
    $("db-next").addEventListener("click", () => this.showRows(this.table, this.offset + PAGE_SIZE));
    $("db-query-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.query($("db-sql").value);
    });
  }

  /** Show the card (the actor has `db=`) and read the tables, and the rows shown, again. */
  async load() {
    const $ = this.$;
    $("db-card").hidden = false;
    this.loaded = true;
    let result;
    try {
      result = await api("GET", `${this.base}/db/tables`);
    } catch (error) {
      showError($("db-error"), error);
      return;
    }
    showError($("db-error"), null);
    $("db-tables").replaceChildren(...result.tables.map((table) => this.tableItem(table)));
    $("db-tables-empty").hidden = result.tables.length > 0;
    if (this.table !== null) await this.showRows(this.table, this.offset);
  }

  tableItem(table) {
    return el(
      "li",
      {},
      el("button", { type: "button", dataset: { table: table.name }, onclick: () => this.showRows(table.name, 0) }, table.name),
      ` ${table.type} `,
      el("code", { class: "muted" }, `(${table.columns.map(columnText).join(", ")})`),
    );
  }

  async showRows(name, offset) {
    const $ = this.$;
    const query = new URLSearchParams({ offset: String(offset), limit: String(PAGE_SIZE) });
    let result;
    try {
      result = await api("GET", `${this.base}/db/tables/${encodeURIComponent(name)}/rows?${query}`);
    } catch (error) {
      showError($("db-error"), error);
      return;
    }
    showError($("db-error"), null);
    this.table = name;
    this.offset = result.offset;
    this.total = result.total;
    $("db-rows-card").hidden = false;
    $("db-rows-title").textContent = name;
    drawRows($("db-rows"), result);
    const last = Math.min(result.offset + result.rows.length, result.total);
    $("db-rows-page").textContent = result.total ? `Rows ${result.offset + 1}–${last} of ${result.total}` : "No rows";
    $("db-prev").disabled = result.offset === 0;
    $("db-next").disabled = last >= result.total;
  }

  async query(sql) {
    const $ = this.$;
    let result;
    try {
      result = await api("POST", `${this.base}/db/query`, { sql, params: [] });
    } catch (error) {
      showError($("db-query-error"), error);
      $("db-result").hidden = true;
      return;
    }
    showError($("db-query-error"), null);
    drawRows($("db-result"), result);
    $("db-result").hidden = false;
    $("db-result-count").textContent = `${result.rows.length} row${result.rows.length === 1 ? "" : "s"}`;
  }
}
