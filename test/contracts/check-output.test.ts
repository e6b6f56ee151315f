/** checkOutput (the executor's runtime check), contract config validation, and chat-template rendering on the fixtures. */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkOutput } from '../../src/contracts/check-output.ts';
import { compileContract } from '../../src/contracts/compile-contract.ts';
import { validateContractConfigs } from '../../src/contracts/contract-config.ts';
import { contractViolationError } from '../../src/contracts/finding.ts';
import { loadChatTemplate, renderChatTemplate, renderPrompt } from '../../src/contracts/prompt-render.ts';
import { FIXTURES, GOOD, TEMPLATES, summaryContract } from './support.ts';

const input = summaryContract().cases as { input: { messages: { role: string; content: string }[] } }[];
const caseInput = input[0]!.input;
const completion = (content: string, finish_reason = 'stop') => ({ content, finish_reason });

describe('checkOutput', () => {
  it('returns the parsed value for a good output', async () => {
    const c = await compileContract('summary', summaryContract(), { baseDir: FIXTURES });
    expect(checkOutput(c, caseInput, completion(JSON.stringify(GOOD)))).toEqual({ ok: true, value: GOOD });
  });

  it('returns the text when the contract has no outputSchema', async () => {
    const c = await compileContract('free', { cases: [{ input: caseInput }] }, { baseDir: FIXTURES });
    expect(checkOutput(c, caseInput, completion('just text'))).toEqual({ ok: true, value: 'just text' });
  });

  it('reports each way an output breaks the contract, as contract_violation findings', async () => {
    const c = await compileContract('summary', summaryContract(), { baseDir: FIXTURES });
    const codes = (text: string, finish = 'stop') => {
      const r = checkOutput(c, caseInput, completion(text, finish));
      return r.ok ? [] : r.findings.map((f) => f.code);
    };
    expect(codes('not json at all')).toEqual(['output_not_json']);
    expect(codes('```json\n' + JSON.stringify(GOOD) + '\n```')).toEqual(['prose_around_json']);
    expect(codes('Here you go: ' + JSON.stringify(GOOD))).toEqual(['prose_around_json']);
    expect(codes(JSON.stringify({ ...GOOD, extra: 1, more: 2 }))).toEqual(['extra_top_level_key', 'extra_top_level_key']);
    expect(codes(JSON.stringify({ summary: 3, lang: 'de' }))).toEqual(['schema_mismatch', 'schema_mismatch']);
    expect(codes(JSON.stringify({ ...GOOD, lang: 'en' }))).toEqual(['business_check_failed']);
    expect(codes(JSON.stringify({ ...GOOD, summary: 'x'.repeat(300) }))).toEqual(['summary_too_long']);
    const cut = checkOutput(c, caseInput, completion('{"summary": "Le ch', 'length'));
    expect(!cut.ok && cut.findings[0]!.message).toMatch(/finish_reason "length"/);

    const r = checkOutput(c, caseInput, completion(JSON.stringify({ ...GOOD, confidence: 1 })));
    expect(r.ok).toBe(false);
    const error = contractViolationError('summary', r.ok ? [] : r.findings);
    expect(error).toMatchObject({ code: 'contract_violation', message: 'contract summary: top-level key "confidence" is not allowed by the schema' });
  });

  it('forbids extra keys even without additionalProperties:false when the contract says forbid', async () => {
    const schema = { type: 'object', properties: { a: { type: 'number' } } };
    const lax = await compileContract('x', { outputSchema: schema, cases: [{ input: caseInput }] }, { baseDir: FIXTURES });
    const strict = await compileContract('x', { outputSchema: schema, extraTopLevelKeys: 'forbid', cases: [{ input: caseInput }] }, { baseDir: FIXTURES });
    expect(checkOutput(lax, {}, completion('{"a":1,"b":2}')).ok).toBe(true);
    expect(checkOutput(strict, {}, completion('{"a":1,"b":2}'))).toMatchObject({ ok: false, findings: [{ code: 'extra_top_level_key', path: '/b' }] });
  });

  it('turns a throwing business check into a finding', async () => {
    const c = await compileContract('summary', summaryContract(), { baseDir: FIXTURES });
    const r = checkOutput(c, { messages: null }, completion(JSON.stringify(GOOD)));
    expect(r).toMatchObject({ ok: false, findings: [{ code: 'business_check_failed', check: 'answersInRequestedLanguage' }] });
  });
});

describe('contract config', () => {
  it('reports every problem with its path', () => {
    expect(validateContractConfigs({
      a: { cases: [] },
      b: { cases: [{ input: { model: 'x', messages: [{ role: 'user', content: 'hi' }] } }], samples: 0, stability: 'maybe', extra: 1 },
      c: { outputSchema: { type: 'nonsense' }, cases: [{ input: { messages: [{ role: 'user', content: 'hi' }] } }] },
    })).toEqual([
      '/contracts/a/cases: must NOT have fewer than 1 items',
      '/contracts/b/extra: is not a known setting',
      '/contracts/b/cases/0/input/model: must not be set (the provider supplies the model)',
      '/contracts/b/samples: must be >= 1',
      '/contracts/b/stability: must be one of "exact", "shape", "off"',
      expect.stringMatching(/^\/contracts\/c\/outputSchema: is not a valid JSON Schema/),
    ]);
    expect(validateContractConfigs({ ok: summaryContract() })).toEqual([]);
  });

  it('fingerprints ignore key order, description and explicit defaults', async () => {
    const a = await compileContract('s', summaryContract(), { baseDir: FIXTURES });
    const b = await compileContract('s', { description: 'hi', temperature: 0, stability: 'exact', ...summaryContract() }, { baseDir: FIXTURES });
    expect(b.fingerprint).toBe(a.fingerprint);
    expect(a.fingerprint).toMatch(/^sha256:[0-9a-f]{64}$/);
  });
});

describe('chat templates (fixtures)', () => {
  const messages = [
    { role: 'system', content: 'Reply in JSON.' },
    { role: 'user', content: 'Hello there.' },
    { role: 'assistant', content: '{"ok": true}' },
    { role: 'user', content: 'Again.' },
  ];
  const load = (dir: string) => loadChatTemplate({ type: 'openai', model: 'm', tokenizerConfigPath: join(TEMPLATES, dir, 'tokenizer_config.json') }, TEMPLATES);

  it('renders ChatML with the generation prompt', () => {
    expect(renderChatTemplate(load('chatml'), messages)).toEqual({
      ok: true,
      text: '<|im_start|>system\nReply in JSON.<|im_end|>\n<|im_start|>user\nHello there.<|im_end|>\n<|im_start|>assistant\n{"ok": true}<|im_end|>\n<|im_start|>user\nAgain.<|im_end|>\n<|im_start|>assistant\n',
    });
  });

  it('ChatML refuses a system message in the middle; Gemma-style refuses any system role and broken alternation', () => {
    const midSystem = [messages[1]!, messages[0]!];
    expect(renderChatTemplate(load('chatml'), midSystem)).toMatchObject({ ok: false, finding: { code: 'template_error', message: 'chat template raised: A system message is only allowed first.' } });
    expect(renderChatTemplate(load('gemma-no-system'), messages)).toMatchObject({ ok: false, finding: { message: 'chat template raised: System role not supported' } });
    expect(renderChatTemplate(load('gemma-no-system'), [messages[1]!, messages[3]!])).toMatchObject({ ok: false, finding: { message: 'chat template raised: Conversation roles must alternate user/assistant/user/assistant/...' } });
    expect(renderChatTemplate(load('gemma-no-system'), messages.slice(1))).toMatchObject({ ok: true, text: '<bos><start_of_turn>user\nHello there.<end_of_turn>\n<start_of_turn>model\n{"ok": true}<end_of_turn>\n<start_of_turn>user\nAgain.<end_of_turn>\n<start_of_turn>model\n' });
  });

  it('Llama-2-style folds the system prompt into the first user turn (kept, so the case may pass)', async () => {
    const r = await renderPrompt({ type: 'openai', model: 'm', tokenizerConfigPath: 'llama2-folded-system/tokenizer_config.json' }, { messages }, { baseDir: TEMPLATES });
    expect(r.ok).toBe(true);
    expect(r.rendered).toBe('<s>[INST] <<SYS>>\nReply in JSON.\n<</SYS>>\n\nHello there. [/INST] {"ok": true} </s><s>[INST] Again. [/INST]');
    expect(r.contextWindow).toBe(8192); // model_max_length of the fixture
  });

  it('catches a template that silently drops the system message or reorders turns', async () => {
    const dropsSystem = "{% for m in messages %}{% if m.role != 'system' %}{{ m.role }}: {{ m.content }}\n{% endif %}{% endfor %}";
    const r = await renderPrompt({ type: 'openai', model: 'm', chatTemplate: dropsSystem }, { messages });
    expect(r.findings).toEqual([{ code: 'system_dropped', message: 'the chat template drops the system message (message 1)' }]);
    const reversed = '{% for m in messages | reverse %}{{ m.content }}\n{% endfor %}';
    const r2 = await renderPrompt({ type: 'openai', model: 'm', chatTemplate: reversed }, { messages: messages.slice(1) });
    expect(r2.findings.map((f) => f.code)).toContain('role_order');
  });
});
