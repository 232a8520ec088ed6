// The goodput report as one sticky pull-request comment: created once, then updated in place,
// found by a hidden marker so that every push to the PR edits the same comment.
//
// Called from actions/github-script (which passes `github`, an authenticated Octokit, and
// `context`, the event): by the gate job itself for same-repository pull requests, and by
// goodput-comment.yml (goodput-gpu-comment.yml, one comment per GPU class: `key`) for pull
// requests from forks, whose own token is read-only.
'use strict';

const fs = require('fs');
const path = require('path');

const MARKER = '<!-- pytest-goodput -->';
// A comment holds at most 65,536 characters; keep room for the marker and the run link.
const LIMIT = 60000;

/** The hidden marker of one report's comment: a GPU class (`key`) has a comment of its own. */
function markerFor(key) {
  return key ? `<!-- pytest-goodput:${String(key).replace(/[^A-Za-z0-9_.-]/g, '_')} -->` : MARKER;
}

/** The comment's text: the report, cut at a paragraph to fit, with a link to the run. */
function commentBody(report, runUrl, key) {
  let body = report;
  if (body.length > LIMIT) {
    const cut = body.lastIndexOf('\n\n', LIMIT);
    body = body.slice(0, cut > 0 ? cut : LIMIT) +
      `\n\n> ✂️ Cut to fit a comment; the full report is in the [run summary](${runUrl}).`;
  }
  return `${markerFor(key)}\n${body}\n\n<sub>[workflow run](${runUrl})</sub>`;
}

/** Create the PR's goodput comment, or update it when the bot already wrote one. */
async function comment({ github, context }, { issueNumber, report, runUrl, key }) {
  const { owner, repo } = context.repo;
  const text = fs.existsSync(report)
    ? fs.readFileSync(report, 'utf8')
    : 'No goodput report was produced: the workflow run says why.';
  const body = commentBody(text, runUrl, key);
  const marker = markerFor(key);
  const comments = await github.paginate(github.rest.issues.listComments,
    { owner, repo, issue_number: issueNumber, per_page: 100 });
  // Only the bot's own comment: a reviewer quoting the report must not be overwritten.
  const mine = comments.find(c => c.user?.login === 'github-actions[bot]' && c.body?.startsWith(marker));
  if (mine) {
    await github.rest.issues.updateComment({ owner, repo, comment_id: mine.id, body });
    return { action: 'updated', id: mine.id };
  }
  const { data } = await github.rest.issues.createComment({ owner, repo, issue_number: issueNumber, body });
  return { action: 'created', id: data.id };
}

/**
 * Comment from the `goodput-report` artifact of a finished run (the `workflow_run` event).
 * The artifact was written by the pull request's code: it is data only. The PR number must be
 * a number and name the pull request whose head the run built.
 */
async function commentFromArtifact({ github, context }, { dir, key }) {
  const run = context.payload.workflow_run;
  const raw = fs.readFileSync(path.join(dir, 'pr-number.txt'), 'utf8').trim();
  if (!/^[0-9]{1,10}$/.test(raw)) throw new Error(`pr-number.txt holds no pull request number: ${JSON.stringify(raw.slice(0, 40))}`);
  const issueNumber = Number(raw);
  const { owner, repo } = context.repo;
  const { data: pr } = await github.rest.pulls.get({ owner, repo, pull_number: issueNumber });
  if (pr.head.sha !== run.head_sha) {
    throw new Error(`pull request #${issueNumber} is at ${pr.head.sha}, the run built ${run.head_sha}: not commenting`);
  }
  return comment({ github, context }, { issueNumber, report: path.join(dir, 'goodput.md'), runUrl: run.html_url, key });
}

module.exports = { MARKER, LIMIT, markerFor, commentBody, comment, commentFromArtifact };
