// The inspector's shared helpers: calling the admin API, showing its errors, building DOM
// nodes, formatting values, and the keyboard shortcut. Everything from the server goes
// into the page as text (never as markup), so actor data cannot inject HTML.

/**
 * Where the server mounts perdure: "" at the root, "/perdure" when a host app mounts it
 * at /perdure (docs/embedding.md). The page says so in `<meta name="perdure-root">`.
 */
export const root = document.querySelector('meta[name="perdure-root"]')?.getAttribute("content") ?? "";

/** A path of perdure's (`/ui/…`, `/admin/…`) as a path on this server. */
export function url(path) {
  return root + path;
}

/** An admin API error: perdure's error body `{group, code, message, metadata}`. */
export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.group = (body && body.group) || "http";
    this.code = (body && body.code) || String(status);
  }

  get identifier() {
    return `${this.group}.${this.code}`;
  }
}

/** Call the admin API: JSON in, JSON out; throws ApiError with the server's error body. */
export async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: { accept: "application/json" } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["content-type"] = "application/json";
  }
  let response;
  try {
    response = await fetch(url(path), init);
  } catch (error) {
    throw new ApiError(0, { group: "network", code: "unreachable", message: `The server did not answer (${error.message}).` });
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { message: text.slice(0, 300) || response.statusText };
  }
  if (!response.ok) {
    const error = new ApiError(response.status, data);
    if (error.identifier === "admin.unauthorized") signIn();
    throw error;
  }
  return data;
}

/** The token stopped working (or was never given): go to the sign-in page, then back. */
export function signIn() {
  const next = location.pathname + location.search;
  location.assign(url(`/ui/login?next=${encodeURIComponent(next)}`));
}

/** Show an error in a `role="alert"` element as "group.code: message". */
export function showError(target, error) {
  if (!error) {
    target.hidden = true;
    target.textContent = "";
    return;
  }
  target.textContent = "";
  if (error instanceof ApiError) {
    target.append(el("code", {}, error.identifier), `: ${error.message}`);
  } else {
    target.append(String(error.message || error));
  }
  target.hidden = false;
}

/** `el("a", {href: "/x", class: "y"}, "text", childNode)`; attributes are set, text is text. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "dataset") Object.assign(node.dataset, value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

/** Pretty JSON for display (the API already turned bytes and big ints into JSON). */
export function pretty(value) {
  return value === undefined ? "" : JSON.stringify(value, null, 2);
}

/** One-line JSON, cut at `max` characters. */
export function brief(value, max = 80) {
  const text = JSON.stringify(value);
  if (text === undefined) return "";
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

const pad = (n) => String(n).padStart(2, "0");

/** Epoch milliseconds as local "YYYY-MM-DD HH:MM:SS" (null → "—"). */
export function when(ms) {
  if (ms === null || ms === undefined) return "—";
  const d = new Date(Number(ms));
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** A `<time>` element showing `when(ms)`, with the UTC instant as its machine value. */
export function timeEl(ms) {
  if (ms === null || ms === undefined) return el("span", { class: "muted" }, "—");
  const iso = new Date(Number(ms)).toISOString();
  return el("time", { datetime: iso, title: iso }, when(ms));
}

/** Milliseconds as a short duration: "250 ms", "30 s", "5 min", "1.5 h", "2 d". */
export function duration(ms) {
  const units = [
    [86400000, "d"],
    [3600000, "h"],
    [60000, "min"],
    [1000, "s"],
  ];
  for (const [size, unit] of units) {
    if (ms >= size) return `${Number((ms / size).toFixed(1))} ${unit}`;
  }
  return `${ms} ms`;
}

/** An actor's key as the search matches it: parts joined by "/". */
export function keyText(key) {
  return key && key.length ? key.join("/") : "(no key)";
}

/** Parse a JSON form field; a clear error names the field. */
export function parseJson(text, label) {
  try {
    return JSON.parse(text.trim() === "" ? "null" : text);
  } catch (error) {
    throw new Error(`${label} is not valid JSON: ${error.message}`);
  }
}

/** "/" focuses the search box, unless the user is typing somewhere. */
export function installShortcuts() {
  document.addEventListener("keydown", (event) => {
    if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    if (target instanceof HTMLElement && (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName))) return;
    const search = document.getElementById("search");
    if (search) {
      event.preventDefault();
      search.focus();
      search.select();
    } else {
      location.assign(url("/ui/#search"));
    }
  });
}

/** A status badge: `<span class="badge status-failed">failed</span>`. */
export function badge(node, text) {
  node.textContent = text;
  node.className = `badge status-${String(text).replace(/[^a-z_-]/gi, "")}`;
}
