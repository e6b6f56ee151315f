/**
 * The one redaction of credentials and organisation ids (src/core/redact-credentials.ts),
 * over the shapes providers really write in their error messages.
 */
import { describe, expect, it } from 'vitest';
import { redactCredentials, redactStrings } from '../../src/core/redact-credentials.ts';

describe('redactCredentials', () => {
  const cases: [string, string, string[]][] = [
    ['OpenAI: a wrong key, masked', 'Incorrect API key provided: sk-proj-AbCd****************************wxYZ. You can find your API key at https://platform.openai.com/account/api-keys.', ['sk-proj', 'AbCd', 'wxYZ']],
    ['OpenAI: a whole key', 'key sk-AbCdEf0123456789AbCdEf0123456789 rejected', ['sk-AbCd', '0123456789']],
    ['Anthropic key', 'invalid x-api-key sk-ant-api03-AbCdEf0123456789-xyz', ['sk-ant', 'AbCdEf']],
    ['an organisation id', 'Rate limit reached for gpt-4o in organization org-AbCdEf1234567890 on tokens per min (TPM)', ['AbCdEf1234567890']],
    ['a project id', 'project proj_AbCdEf1234567890 over quota', ['AbCdEf1234567890']],
    ['a bearer token', 'upstream said: Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig was refused', ['eyJhbGci', 'payload.sig']],
    ['URL userinfo', 'could not reach https://alice:s3cr3t-pass@llm.internal:8443/v1 (ECONNREFUSED)', ['alice', 's3cr3t']],
    ['postgres URL userinfo', 'postgres://onejob:hunter2@db:5432/onejob', ['hunter2', 'onejob:']],
    ['api_key= in a query string', 'GET https://api.example.com/v1/models?api_key=abc123secret&x=1', ['abc123secret']],
    ['a JSON x-api-key member', '{"x-api-key": "live-key-998877", "ok": false}', ['live-key-998877']],
    ['Google key', 'API key not valid: AIzaSyA-0123456789abcdefghijklmnopqrstu', ['AIzaSyA']],
    ['AWS key id', 'The security token AKIAABCDEFGHIJKLMNOP is invalid', ['AKIAABCDEFGHIJKLMNOP']],
    ['Hugging Face token', 'bad token hf_AbCdEfGhIjKlMnOpQrStUv', ['hf_AbCd']],
  ];
  for (const [name, text, secrets] of cases) {
    it(`removes ${name}`, () => {
      const out = redactCredentials(text);
      for (const secret of secrets) expect(out).not.toContain(secret);
      expect(out).toContain('[redacted]');
    });
  }

  it('keeps what tells the operator and the tenant what happened', () => {
    const text = 'primary answered 429 rate_limit_exceeded (rate limited, the request was not processed): Rate limit reached for gpt-4o in organization org-AbCdEf123456 on tokens per min (TPM): Limit 30000, Used 29800, Requested 900. Please try again in 1.4s. max_tokens is 4096.';
    const out = redactCredentials(text);
    expect(out).toBe(text.replace('org-AbCdEf123456', 'org-[redacted]'));
  });

  it('leaves ordinary words alone (task-…, desk-…, tokens:, max_tokens=)', () => {
    for (const text of ['task-runner failed', 'desk-12345678 moved', 'tokens: 12', 'max_tokens=4096', 'This model’s maximum context length is 8192 tokens', 'request req_0123456789abcdef']) {
      expect(redactCredentials(text)).toBe(text);
    }
  });

  it('redactStrings redacts every string value of a record and keeps the rest', () => {
    expect(redactStrings({ status: 401, provider: 'primary', provider_message: 'bad key sk-abcdef123456', retry: true })).toEqual({
      status: 401, provider: 'primary', provider_message: 'bad key [redacted]', retry: true,
    });
  });
});
