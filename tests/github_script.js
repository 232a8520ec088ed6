// Runs an actions/github-script `script:` the way the action does, against a mocked GitHub API.
//
// usage: node github_script.js SCRIPT_FILE STATE_JSON (read|write)
//
// Like the action: the script is the body of an async function of (require, github, context,
// core); `require` resolves relative paths against the working directory (the workspace);
// `context` is built from the runner's GITHUB_* variables and the event payload file. The
// mocked `github` keeps pull requests and comments in STATE_JSON (read, then written back), refuses
// writes with a read-only token (as GitHub does for a fork's pull request) and throws on any
// API the mock does not implement, so a script cannot silently call something untested.
'use strict';

const fs = require('fs');
const path = require('path');
const Module = require('module');

const [scriptFile, stateFile, access] = process.argv.slice(2);
const state = JSON.parse(fs.readFileSync(stateFile, 'utf8'));
const env = process.env;
const [ownerName, repoName] = env.GITHUB_REPOSITORY.split('/');
const payload = JSON.parse(fs.readFileSync(env.GITHUB_EVENT_PATH, 'utf8'));

function fail(status, message) {
  const err = new Error(`HttpError: ${message}`);
  err.status = status;
  throw err;
}

function checkRepo({ owner, repo }) {
  if (owner !== ownerName || repo !== repoName) fail(404, `Not Found: ${owner}/${repo}`);
}

function needWrite(what) {
  if (access !== 'write') fail(403, `Resource not accessible by integration (${what})`);
}

function pull(number) {
  const pr = state.pulls[String(number)];
  if (!pr) fail(404, `Not Found: pull request ${number}`);
  return pr;
}

const rest = {
  issues: {
    async listComments({ owner, repo, issue_number, per_page = 30, page = 1 }) {
      checkRepo({ owner, repo });
      pull(issue_number);
      const all = state.comments.filter(c => c.issue_number === issue_number);
      return { data: all.slice((page - 1) * per_page, page * per_page) };
    },
    async createComment({ owner, repo, issue_number, body }) {
      checkRepo({ owner, repo });
      needWrite('createComment');
      pull(issue_number);
      if (typeof body !== 'string' || body.length > 65536) fail(422, 'Validation Failed: body is too long');
      const comment = { id: state.next_id++, issue_number, body, user: { login: 'github-actions[bot]' } };
      state.comments.push(comment);
      state.calls.push(['createComment', issue_number]);
      return { data: comment };
    },
    async updateComment({ owner, repo, comment_id, body }) {
      checkRepo({ owner, repo });
      needWrite('updateComment');
      const comment = state.comments.find(c => c.id === comment_id);
      if (!comment) fail(404, `Not Found: comment ${comment_id}`);
      if (body.length > 65536) fail(422, 'Validation Failed: body is too long');
      comment.body = body;
      state.calls.push(['updateComment', comment_id]);
      return { data: comment };
    },
  },
  pulls: {
    async get({ owner, repo, pull_number }) {
      checkRepo({ owner, repo });
      const pr = pull(pull_number);
      return { data: { number: pull_number, head: { sha: pr.head_sha } } };
    },
  },
};

// Any API the mock does not implement is an error, never an undefined call.
function strict(obj, where) {
  return new Proxy(obj, {
    get(target, name) {
      if (typeof name === 'symbol' || name === 'then') return target[name];
      if (!(name in target)) throw new Error(`mocked GitHub API has no ${where}.${String(name)}`);
      const value = target[name];
      return value && typeof value === 'object' ? strict(value, `${where}.${name}`) : value;
    },
  });
}

const github = strict({
  rest,
  async paginate(method, params) {
    const perPage = params.per_page || 30;
    const out = [];
    for (let page = 1; ; page++) {
      const { data } = await method({ ...params, page });
      out.push(...data);
      if (data.length < perPage) return out;
    }
  },
}, 'github');

const issueNumber = (payload.pull_request || payload.issue || {}).number;
const context = {
  payload,
  eventName: env.GITHUB_EVENT_NAME,
  sha: env.GITHUB_SHA,
  ref: env.GITHUB_REF,
  runId: Number(env.GITHUB_RUN_ID),
  serverUrl: env.GITHUB_SERVER_URL,
  repo: { owner: ownerName, repo: repoName },
  issue: { owner: ownerName, repo: repoName, number: issueNumber },
};

const core = {
  info: m => console.log(m),
  warning: m => console.log(`::warning::${m}`),
  setFailed: m => { console.log(`::error::${m}`); process.exitCode = 1; },
};

// github-script's require: relative paths from the working directory, packages from there too.
const cwdRequire = Module.createRequire(path.join(process.cwd(), 'noop.js'));
function wrappedRequire(id) {
  return id.startsWith('.') ? cwdRequire(path.resolve(process.cwd(), id)) : cwdRequire(id);
}

const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor;
const script = fs.readFileSync(scriptFile, 'utf8');
new AsyncFunction('require', 'github', 'context', 'core', script)(wrappedRequire, github, context, core)
  .then(result => {
    if (result !== undefined) console.log(JSON.stringify(result));
  })
  .catch(err => {
    console.log(`::error::Unhandled error: ${err.message}`);
    process.exitCode = 1;
  })
  .finally(() => fs.writeFileSync(stateFile, JSON.stringify(state, null, 1)));
