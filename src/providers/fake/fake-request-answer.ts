/**
 * What a fake with `fitRequest` answers when its behaviour gives no reply: a
 * call of the request's tool when it offers tools, JSON that fits the
 * request's JSON schema when it asks for one, so that a demo shows tools and
 * structured output working instead of an echo that looks like a bug.
 *
 * It reads the wire dialects: OpenAI (`tools[].function.parameters`,
 * `tool_choice`, `response_format: {type: "json_schema", json_schema: {schema}}`
 * or `{type: "json_object"}`), Anthropic (`tools[].input_schema`,
 * `tool_choice`, `output_config.format` / `output_format` with a `schema`)
 * and the Responses API (`tools[].parameters`, `text.format`, `input` items).
 * The values are made up from the schema alone: the first `enum` member, the
 * `minimum`, a string of `minLength`, every property (required or not).
 */

/** A tool call the fake makes: a tool's name and arguments that fit its parameters' schema. */
export interface FakeAnswerToolCall {
  readonly name: string;
  readonly arguments: unknown;
}

/** The fake's answer to one request: a tool call, or text (JSON text when a schema asked for it), or nothing to add. */
export type FakeRequestAnswer = { readonly toolCall: FakeAnswerToolCall } | { readonly json: unknown } | null;

type Schema = Record<string, unknown>;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The tool a request leaves the model to call: the one `tool_choice` names, else the first; none when it says none or the last turn already carries a tool's result. */
function chosenTool(body: Record<string, unknown>): { name: string; schema: unknown } | null {
  const tools = Array.isArray(body.tools) ? body.tools.filter(isRecord) : [];
  if (tools.length === 0 || answersToolResult(body)) return null;
  const choice = body.tool_choice;
  if (choice === 'none' || (isRecord(choice) && choice.type === 'none')) return null;
  const named = isRecord(choice) ? (isRecord(choice.function) ? choice.function.name : choice.name) : undefined;
  // OpenAI chat (`function.parameters`), Anthropic (`input_schema`), the Responses API (`parameters` at the top).
  const described = tools.map((t) => (isRecord(t.function) ? { name: t.function.name, schema: t.function.parameters } : { name: t.name, schema: t.input_schema ?? t.parameters }));
  const usable = described.filter((t): t is { name: string; schema: unknown } => typeof t.name === 'string');
  return usable.find((t) => t.name === named) ?? usable[0] ?? null;
}

/** Whether the last message is a tool's result (OpenAI role `tool`, an Anthropic `tool_result` block): the model's turn to answer in words. */
function answersToolResult(body: Record<string, unknown>): boolean {
  const messages = Array.isArray(body.messages) ? body.messages : Array.isArray(body.input) ? body.input : [];
  const last: unknown = messages[messages.length - 1];
  if (!isRecord(last)) return false;
  return last.role === 'tool' || last.type === 'function_call_output' || (Array.isArray(last.content) && last.content.some((b) => isRecord(b) && b.type === 'tool_result'));
}

/** The JSON schema a request wants its answer to fit, `{}` for "any JSON object", or null for free text. */
function answerSchema(body: Record<string, unknown>): Schema | null {
  const format = body.response_format;
  if (isRecord(format)) {
    if (format.type === 'json_schema') return isRecord(format.json_schema) && isRecord(format.json_schema.schema) ? format.json_schema.schema : {};
    if (format.type === 'json_object') return { type: 'object' };
  }
  for (const holder of [isRecord(body.output_config) ? body.output_config.format : undefined, body.output_format, isRecord(body.text) ? body.text.format : undefined]) {
    if (isRecord(holder) && holder.type === 'json_schema') return isRecord(holder.schema) ? holder.schema : {};
    if (isRecord(holder) && holder.type === 'json_object') return { type: 'object' };
  }
  return null;
}

/**
 * The fake's answer to a request body of either protocol: a tool call when
 * it offers a tool the model may call, else JSON fitting the requested
 * schema, else null (the caller's default reply).
 *
 * @example fakeRequestAnswer({ messages, tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }] })
 * // { toolCall: { name: 'get_weather', arguments: { city: 'city' } } }
 */
export function fakeRequestAnswer(body: unknown): FakeRequestAnswer {
  if (!isRecord(body)) return null;
  const tool = chosenTool(body);
  if (tool !== null) return { toolCall: { name: tool.name, arguments: exampleOf(isRecord(tool.schema) ? tool.schema : { type: 'object' }, tool.schema, 'arguments', 0) } };
  const schema = answerSchema(body);
  return schema === null ? null : { json: exampleOf(schema, schema, 'value', 0) };
}

/**
 * A value that fits `schema` (JSON Schema as OpenAI and Anthropic accept it:
 * `type`, `properties`, `items`, `enum`, `const`, `anyOf`/`oneOf`/`allOf`,
 * local `$ref`s, the usual bounds and string formats). `name` is the
 * property it is for, used as the text of a free string.
 *
 * @example schemaExample({ type: 'object', properties: { n: { type: 'integer', minimum: 3 } } }) // { n: 3 }
 */
export function schemaExample(schema: unknown): unknown {
  return exampleOf(isRecord(schema) ? schema : {}, schema, 'value', 0);
}

function resolveRef(root: unknown, ref: string): Schema {
  if (!ref.startsWith('#')) return {};
  let at: unknown = root;
  for (const part of ref.slice(1).split('/').filter((p) => p !== '')) {
    at = isRecord(at) ? at[part.replace(/~1/g, '/').replace(/~0/g, '~')] : undefined;
  }
  return isRecord(at) ? at : {};
}

function exampleOf(schema: Schema, root: unknown, name: string, depth: number): unknown {
  if (depth > 12) return null;
  if (typeof schema.$ref === 'string') return exampleOf(resolveRef(root, schema.$ref), root, name, depth + 1);
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  for (const key of ['anyOf', 'oneOf'] as const) {
    const options = schema[key];
    if (Array.isArray(options)) {
      const first = options.filter(isRecord).find((o) => o.type !== 'null') ?? options.find(isRecord);
      if (first !== undefined) return exampleOf({ ...schema, [key]: undefined, ...first }, root, name, depth + 1);
    }
  }
  if (Array.isArray(schema.allOf)) {
    const merged: Schema = { ...schema, allOf: undefined };
    for (const part of schema.allOf.filter(isRecord)) {
      const resolved = typeof part.$ref === 'string' ? resolveRef(root, part.$ref) : part;
      Object.assign(merged, resolved, {
        properties: { ...(isRecord(merged.properties) ? merged.properties : {}), ...(isRecord(resolved.properties) ? resolved.properties : {}) },
        required: [...(Array.isArray(merged.required) ? merged.required : []), ...(Array.isArray(resolved.required) ? resolved.required : [])],
      });
    }
    return exampleOf(merged, root, name, depth + 1);
  }
  const types = Array.isArray(schema.type) ? schema.type : [schema.type];
  const type = types.find((t) => t !== 'null') ?? types[0] ?? (isRecord(schema.properties) ? 'object' : isRecord(schema.items) ? 'array' : undefined);
  switch (type) {
    case 'object': {
      const out: Record<string, unknown> = {};
      const properties = isRecord(schema.properties) ? schema.properties : {};
      for (const [key, sub] of Object.entries(properties)) out[key] = exampleOf(isRecord(sub) ? sub : {}, root, key, depth + 1);
      return out;
    }
    case 'array': {
      const count = typeof schema.minItems === 'number' ? Math.max(1, schema.minItems) : 1;
      const items = Array.isArray(schema.prefixItems) ? schema.prefixItems.filter(isRecord) : [];
      const rest = isRecord(schema.items) ? schema.items : {};
      const max = typeof schema.maxItems === 'number' ? schema.maxItems : Infinity;
      const length = Math.min(Math.max(count, items.length), max);
      return Array.from({ length }, (_, i) => exampleOf(items[i] ?? rest, root, name, depth + 1));
    }
    case 'integer':
    case 'number':
      return numberExample(schema, type === 'integer');
    case 'boolean':
      return true;
    case 'null':
      return null;
    case 'string':
      return stringExample(schema, name);
    default:
      return name;
  }
}

function numberExample(schema: Schema, integer: boolean): number {
  const min = typeof schema.minimum === 'number' ? schema.minimum : typeof schema.exclusiveMinimum === 'number' ? schema.exclusiveMinimum + (integer ? 1 : 0.5) : undefined;
  const max = typeof schema.maximum === 'number' ? schema.maximum : typeof schema.exclusiveMaximum === 'number' ? schema.exclusiveMaximum - (integer ? 1 : 0.5) : undefined;
  let n = min ?? (max !== undefined && max < 1 ? max : 1);
  if (integer) n = Math.ceil(n);
  const step = typeof schema.multipleOf === 'number' && schema.multipleOf > 0 ? schema.multipleOf : undefined;
  if (step !== undefined) n = Math.ceil(n / step) * step;
  return n;
}

const FORMAT_EXAMPLES: Readonly<Record<string, string>> = {
  'date-time': '2026-01-02T03:04:05Z',
  date: '2026-01-02',
  time: '03:04:05Z',
  email: 'user@example.com',
  uri: 'https://example.com/',
  uuid: '01234567-89ab-4cde-8f01-23456789abcd',
  hostname: 'example.com',
  ipv4: '192.0.2.1',
  ipv6: '2001:db8::1',
  duration: 'PT1M',
};

function stringExample(schema: Schema, name: string): string {
  if (typeof schema.format === 'string' && FORMAT_EXAMPLES[schema.format] !== undefined) return FORMAT_EXAMPLES[schema.format]!;
  const min = typeof schema.minLength === 'number' ? schema.minLength : 0;
  const max = typeof schema.maxLength === 'number' ? schema.maxLength : Infinity;
  let text = name;
  while (text.length < min) text += ` ${name}`;
  return text.slice(0, Math.max(min, Math.min(max, text.length)));
}
