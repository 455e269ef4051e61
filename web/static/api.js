// The JSON API client of the dashboard: bearer token from sessionStorage,
// problem+json errors as ApiError. Paths are relative ("jobs?state=dead"),
// so that the page works wherever the API and it are mounted (/, /sked/).

const TOKEN_KEY = "sked.token";

/** ApiError is a non-2xx answer; problem is its problem+json body, if any. */
export class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
}

let asking = null; // the pending token prompt, shared by concurrent 401s

// The header's "Forget token" button, shown while this tab keeps a token
// (on a shared screen, the way to log out short of closing the tab):
// it removes the token and loads the page again, which asks for one.
const forget = document.getElementById("forget-token");
forget.addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  location.reload();
});

function askToken(message) {
  if (asking) return asking;
  const dialog = document.getElementById("token-dialog");
  const form = document.getElementById("token-form");
  const input = document.getElementById("token-input");
  const err = document.getElementById("token-error");
  err.hidden = !message;
  err.textContent = message || "";
  input.value = "";
  // Closed by a token given or by Escape: the request is sent again,
  // and asks again if it is still refused.
  asking = new Promise((resolve) => {
    const submitted = () => sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    form.addEventListener("submit", submitted, { once: true });
    dialog.addEventListener("close", () => {
      form.removeEventListener("submit", submitted);
      asking = null;
      resolve();
    }, { once: true });
  });
  const live = document.getElementById("live");
  if (live) {
    live.className = "live waiting";
    live.textContent = "needs a token";
  }
  if (!dialog.open) dialog.showModal();
  return asking;
}

/**
 * api calls the API at path (relative to the page) and returns the decoded
 * JSON (null for 204). A body goes as JSON, a PATCH's as a JSON merge patch;
 * changes are signed "dashboard" for the job's timeline. It throws ApiError
 * for a non-2xx answer. On 401 it asks for a token and tries again.
 */
export async function api(method, path, body) {
  for (let tries = 0; ; tries++) {
    const headers = { Accept: "application/json", "Sked-Actor": "dashboard" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = "Bearer " + token;
    const init = { method, headers };
    if (body !== undefined) {
      headers["Content-Type"] = method === "PATCH" ? "application/merge-patch+json" : "application/json";
      init.body = typeof body === "string" ? body : JSON.stringify(body);
    }
    const resp = await fetch(path, init);
    showRole(resp.headers.get("Sked-Role"));
    forget.hidden = !token;
    if (resp.status === 401 && tries < 5) {
      await askToken(token ? "That token was refused; try another." : "");
      continue;
    }
    const text = await resp.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch { data = { detail: text }; }
    }
    if (!resp.ok) throw new ApiError(resp.status, waitAsTime(data, resp.headers.get("Retry-After")));
    if (text && !/json/.test(resp.headers.get("Content-Type") || "")) {
      // Not the API's answer: a path that left the API, such as a job
      // named "..", or a proxy's page.
      throw new ApiError(resp.status, { detail: `${path} answered ${resp.headers.get("Content-Type") || "no type"}, not the API's JSON` });
    }
    gotAnswer = true;
    return data;
  }
}

let gotAnswer = false;

// waitAsTime puts a problem's "after Retry-After seconds", the header an
// API client reads and a person does not see, as the time the header
// says, as sked's commands do ("retry after 5s").
function waitAsTime(problem, retryAfter) {
  const seconds = Number(retryAfter);
  if (typeof problem?.detail !== "string" || !(seconds > 0)) return problem;
  return { ...problem, detail: problem.detail.replaceAll("after Retry-After seconds", `after ${seconds}s`) };
}

// showRole marks the page with the role the server says the token has
// (Sked-Role): with "read", what only changes a job (class "write") is
// left out, and what says why (class "read-only-note") is shown.
function showRole(role) {
  if (role) document.documentElement.dataset.role = role;
}

/** answered says whether the API has answered a request with success yet. */
export function answered() { return gotAnswer; }
