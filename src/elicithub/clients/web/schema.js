// Checks an answer against a flat requestedSchema exactly as the hub does (core/schema.py validate_content),
// so a person sees the same messages before sending as the server would return.

const EMAIL = /^[^@\s]+@[^@\s.]+(?:\.[^@\s.]+)+$/u;
const DATE = /^([0-9]{4})-([0-9]{2})-([0-9]{2})$/;
const DATE_TIME =
  /^([0-9]{4}-[0-9]{2}-[0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]+)?(?:[Zz]|[+-]([0-9]{2}):([0-9]{2}))$/;
const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):/;

export const FORMAT_MESSAGES = {
  email: "must be a valid email address",
  uri: "must be a valid URI",
  date: "must be a valid date (YYYY-MM-DD)",
  "date-time": "must be a valid date-time with a timezone (e.g. 2025-01-31T09:00:00Z)",
};

const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);
const isNumber = (value) => typeof value === "number" && Number.isFinite(value);
const count = (n, noun) => (n === 1 ? `${n} ${noun}` : `${n} ${noun}s`);

/** The properties of a schema, as [name, definition] pairs in schema order. */
export function properties(schema) {
  return isObject(schema) && isObject(schema.properties) ? Object.entries(schema.properties) : [];
}

export function requiredNames(schema) {
  const required = isObject(schema) ? schema.required : null;
  return new Set(Array.isArray(required) ? required.filter((r) => typeof r === "string") : []);
}

/** The choices of a select or multi-select as [{value, title}], or null for a free-form field. */
export function options(prop) {
  const source = prop.type === "array" ? prop.items : prop;
  if (!isObject(source)) return null;
  if (Array.isArray(source.enum)) {
    const names = Array.isArray(source.enumNames) ? source.enumNames : [];
    return source.enum.map((value, i) => ({ value: String(value), title: String(names[i] ?? value) }));
  }
  for (const key of ["oneOf", "anyOf"]) {
    if (Array.isArray(source[key])) {
      return source[key]
        .filter(isObject)
        .map((option) => ({ value: String(option.const), title: String(option.title ?? option.const) }));
    }
  }
  return null;
}

/** [] when `content` fits `schema`, else the first problem of each field as {field, message}. */
export function validateContent(schema, content) {
  if (!isObject(content)) return [{ field: "", message: "content must be an object" }];
  const props = properties(schema);
  const required = requiredNames(schema);
  const errors = [];
  for (const [name, prop] of props) {
    const value = content[name];
    if (value === null || value === undefined) {
      if (required.has(name)) errors.push({ field: name, message: "is required" });
      continue;
    }
    const problem = isObject(prop) ? valueProblem(prop, value) : null;
    if (problem !== null) errors.push({ field: name, message: problem });
  }
  const known = new Set(props.map(([name]) => name));
  for (const key of Object.keys(content)) {
    if (!known.has(key)) errors.push({ field: key, message: "is not a field of this form" });
  }
  return errors;
}

function valueProblem(prop, value) {
  switch (prop.type) {
    case "string":
      return stringProblem(prop, value);
    case "number":
    case "integer":
      return numberProblem(prop, value, prop.type === "integer");
    case "boolean":
      return typeof value === "boolean" ? null : "must be a boolean";
    case "array":
      return arrayProblem(prop, value);
    default:
      return null;
  }
}

function stringProblem(prop, value) {
  if (typeof value !== "string") return "must be a string";
  const choices = options(prop);
  if (choices !== null) {
    const values = choices.map((c) => c.value);
    return values.includes(value) ? null : `must be one of: ${values.join(", ")}`;
  }
  const length = [...value].length; // code points, as Python's len()
  if (Number.isInteger(prop.minLength) && length < prop.minLength) {
    return `must be at least ${count(prop.minLength, "character")}`;
  }
  if (Number.isInteger(prop.maxLength) && length > prop.maxLength) {
    return `must be at most ${count(prop.maxLength, "character")}`;
  }
  const format = prop.format;
  if (typeof format === "string" && format in FORMAT_MESSAGES && !matchesFormat(format, value)) {
    return FORMAT_MESSAGES[format];
  }
  return null;
}

function numberProblem(prop, value, integer) {
  const typeMessage = integer ? "must be an integer" : "must be a number";
  if (!isNumber(value) || (integer && !Number.isInteger(value))) return typeMessage;
  if (isNumber(prop.minimum) && value < prop.minimum) return `must be at least ${prop.minimum}`;
  if (isNumber(prop.maximum) && value > prop.maximum) return `must be at most ${prop.maximum}`;
  return null;
}

function arrayProblem(prop, value) {
  if (!Array.isArray(value)) return "must be a list";
  if (!value.every((item) => typeof item === "string")) return "must be a list of strings";
  const values = (options(prop) ?? []).map((c) => c.value);
  if (value.some((item) => !values.includes(item))) return `must only contain values from: ${values.join(", ")}`;
  if (new Set(value).size !== value.length) return "must not contain duplicates";
  if (Number.isInteger(prop.minItems) && value.length < prop.minItems) {
    return `must have at least ${count(prop.minItems, "item")}`;
  }
  if (Number.isInteger(prop.maxItems) && value.length > prop.maxItems) {
    return `must have at most ${count(prop.maxItems, "item")}`;
  }
  return null;
}

export function matchesFormat(format, value) {
  if (format === "email") return EMAIL.test(value);
  if (format === "uri") return isUri(value);
  if (format === "date") return isDate(value);
  if (format === "date-time") return isDateTime(value);
  return true;
}

function isDate(value) {
  const m = DATE.exec(value);
  if (m === null) return false;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (year < 1 || month < 1 || month > 12 || day < 1) return false;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1];
  return day <= days;
}

function isDateTime(value) {
  const m = DATE_TIME.exec(value);
  if (m === null || !isDate(m[1])) return false;
  const [hour, minute, second] = [Number(m[2]), Number(m[3]), Number(m[4])];
  if (hour > 23 || minute > 59 || second > 59) return false;
  // Like Python's fromisoformat: any offset shorter than a day, even one written "+05:60".
  if (m[5] !== undefined && Number(m[5]) * 60 + Number(m[6]) >= 24 * 60) return false;
  return true;
}

function isUri(value) {
  // Python's urlsplit: a scheme, then "//netloc" or a path; the value must have no whitespace or controls.
  if (!value || /[\s\p{C}\p{Z}]/u.test(value)) return false;
  const scheme = SCHEME.exec(value);
  if (scheme === null) return false;
  let rest = value.slice(scheme[0].length);
  let netloc = "";
  if (rest.startsWith("//")) {
    const end = rest.slice(2).search(/[/?#]/);
    netloc = end === -1 ? rest.slice(2) : rest.slice(2, 2 + end);
    rest = end === -1 ? "" : rest.slice(2 + end);
    if (netloc.includes("[") !== netloc.includes("]")) return false;
    if (netloc.includes("[") && !isBracketedHost(netloc.split("[")[1].split("]")[0])) return false;
  }
  const path = rest.split("#")[0].split("?")[0];
  return netloc !== "" || path !== "";
}

function isBracketedHost(host) {
  if (host.startsWith("v")) return /^v[a-fA-F0-9]+\..+$/.test(host);
  try {
    new URL(`http://[${host.split("%")[0]}]/`);
    return true;
  } catch {
    return false;
  }
}
