/**
 * The page of our problem statement: a "Summarize" button whose first
 * request stalls, a "Try the fallback" button, a reload in the middle, and
 * one job with its attempts at the end. The button is never disabled: the
 * intent's key, not the button, is what makes a second click harmless.
 */
import { useState } from 'react';
import { OnejobClient, type Job } from 'onejob/client';
import { useIntent } from 'onejob/react';

// Same origin: the example's server forwards /v1 to onejob and adds the API token.
const client = new OnejobClient({ waitSliceSeconds: 2 });

const SAMPLE = 'The quick brown fox jumps over the lazy dog. The dog, unimpressed, goes back to sleep.';

function inputText(input: unknown): string | null {
  const content = (input as { messages?: { content?: unknown }[] } | null)?.messages?.[0]?.content;
  return typeof content === 'string' ? content.replace(/^Summarize: /, '') : null;
}

export function App() {
  const summarize = useIntent({ client, route: 'summarize' });
  const [draft, setDraft] = useState<string | null>(null);
  const text = draft ?? inputText(summarize.input) ?? SAMPLE;
  const job = summarize.job;
  const content = (job?.result as { content?: unknown } | null)?.content;

  return (
    <main style={{ fontFamily: 'system-ui, sans-serif', maxWidth: 760, margin: '2rem auto', lineHeight: 1.4 }}>
      <h1 style={{ marginBottom: 0 }}>Summarize</h1>
      <p style={{ color: '#555', marginTop: 4 }}>
        One job per intent: click as often as you like, reload in the middle, try the fallback. There is one job.
      </p>
      <textarea
        aria-label="text"
        rows={3}
        style={{ width: '100%' }}
        value={text}
        onChange={(e) => setDraft(e.target.value)}
      />
      <p style={{ display: 'flex', gap: 8 }}>
        <button id="summarize" onClick={() => summarize.start({ messages: [{ role: 'user', content: `Summarize: ${text}` }] })}>
          Summarize
        </button>
        <button id="fallback" disabled={summarize.status !== 'in_doubt'} onClick={() => void summarize.fallback()}>
          Try the fallback
        </button>
        <button id="reset" onClick={() => { summarize.reset(); setDraft(null); }}>
          New summary
        </button>
      </p>
      <p>
        Status: <strong data-testid="status">{summarize.status}</strong>
        {summarize.key !== null && <span style={{ color: '#777' }}> · key <code data-testid="key">{summarize.key}</code></span>}
      </p>
      {summarize.status === 'in_doubt' && (
        <p data-testid="doubt" style={{ background: '#fff4d6', padding: 8 }}>
          The primary provider did not answer in time: it may still have done the work. Waiting costs nothing;
          "Try the fallback" gives up on it and asks the next provider, under the same job.
        </p>
      )}
      {summarize.error !== null && (
        <p data-testid="error" style={{ background: '#fde2e2', padding: 8 }}>
          <code>{summarize.error.code}</code>: {summarize.error.message}
        </p>
      )}
      {job !== null && <JobPanel job={job} />}
      {typeof content === 'string' && (
        <blockquote data-testid="result" style={{ borderLeft: '4px solid #3a7', margin: 0, padding: '4px 12px' }}>
          {content}
        </blockquote>
      )}
      <Story />
    </main>
  );
}

/**
 * A streamed answer: `useIntent({ stream: true })` shows the text as it
 * arrives and keeps it, with the id of the last event, across a reload:
 * reload mid-answer and the text continues where it was, it does not restart.
 */
function Story() {
  const story = useIntent({ client, route: 'story', name: 'story', stream: true });
  return (
    <section style={{ marginTop: '2rem' }}>
      <h2 style={{ marginBottom: 0 }}>Tell a story (streamed)</h2>
      <p style={{ color: '#555', marginTop: 4 }}>Reload the page in the middle of the story: it goes on from where it was.</p>
      <p style={{ display: 'flex', gap: 8 }}>
        <button id="story" onClick={() => story.start({ messages: [{ role: 'user', content: 'Tell me a story.' }] })}>Tell a story</button>
        <button id="story-reset" onClick={() => story.reset()}>New story</button>
        <span>Status: <strong data-testid="story-status">{story.status}</strong></span>
      </p>
      {story.error !== null && <p data-testid="story-error"><code>{story.error.code}</code>: {story.error.message}</p>}
      <blockquote data-testid="story-text" style={{ borderLeft: '4px solid #37a', margin: 0, padding: '4px 12px', minHeight: '1.4em' }}>
        {story.text}
      </blockquote>
    </section>
  );
}

function JobPanel({ job }: { job: Job }) {
  const cell = { padding: '2px 10px', borderBottom: '1px solid #ddd', textAlign: 'left' as const };
  return (
    <section>
      <p>
        Job <code data-testid="job-id">{job.id}</code> is <strong data-testid="job-state">{job.state}</strong>
      </p>
      <table data-testid="attempts" style={{ borderCollapse: 'collapse' }}>
        <thead>
          <tr>
            <th style={cell}>#</th>
            <th style={cell}>provider</th>
            <th style={cell}>why</th>
            <th style={cell}>state</th>
          </tr>
        </thead>
        <tbody>
          {job.attempts.map((a) => (
            <tr key={a.id} data-testid="attempt">
              <td style={cell}>{a.number}</td>
              <td style={cell}>{a.provider}</td>
              <td style={cell}>{a.kind}</td>
              <td style={cell}>{a.state}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
