#include "server/grpc/reflection_answers.h"

#include <deque>
#include <utility>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mcserve::server {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;
namespace reflection = grpc::reflection::v1;

const DescriptorPool& Pool() { return *DescriptorPool::generated_pool(); }

void SetError(const absl::Status& status, reflection::ServerReflectionResponse* response) {
  reflection::ErrorResponse* error = response->mutable_error_response();
  error->set_error_code(static_cast<int32_t>(status.code()));
  error->set_error_message(std::string(status.message()));
}

// `file` and every file it imports, transitively, each once, `file` first.
void AddFileWithDependencies(const FileDescriptor& file, reflection::ServerReflectionResponse* response) {
  reflection::FileDescriptorResponse* files = response->mutable_file_descriptor_response();
  absl::flat_hash_set<const FileDescriptor*> seen = {&file};
  std::deque<const FileDescriptor*> queue = {&file};
  while (!queue.empty()) {
    const FileDescriptor* next = queue.front();
    queue.pop_front();
    google::protobuf::FileDescriptorProto proto;
    next->CopyTo(&proto);
    files->add_file_descriptor_proto(proto.SerializeAsString());
    for (int i = 0; i < next->dependency_count(); ++i) {
      if (seen.insert(next->dependency(i)).second) queue.push_back(next->dependency(i));
    }
  }
}

void AnswerFile(const FileDescriptor* file, absl::string_view what, reflection::ServerReflectionResponse* response) {
  if (file == nullptr) return SetError(absl::NotFoundError(absl::StrCat(what, " not found")), response);
  AddFileWithDependencies(*file, response);
}

void AnswerExtension(const reflection::ExtensionRequest& request, reflection::ServerReflectionResponse* response) {
  const Descriptor* type = Pool().FindMessageTypeByName(request.containing_type());
  if (type == nullptr) {
    return SetError(absl::NotFoundError(absl::StrCat("type not found: ", request.containing_type())), response);
  }
  const FieldDescriptor* extension = Pool().FindExtensionByNumber(type, request.extension_number());
  if (extension == nullptr) {
    return SetError(absl::NotFoundError(absl::StrCat("extension not found: ", request.containing_type(), " ",
                                                     request.extension_number())),
                    response);
  }
  AddFileWithDependencies(*extension->file(), response);
}

void AnswerExtensionNumbers(const std::string& type_name, reflection::ServerReflectionResponse* response) {
  const Descriptor* type = Pool().FindMessageTypeByName(type_name);
  if (type == nullptr) return SetError(absl::NotFoundError(absl::StrCat("type not found: ", type_name)), response);
  std::vector<const FieldDescriptor*> extensions;
  Pool().FindAllExtensions(type, &extensions);
  reflection::ExtensionNumberResponse* numbers = response->mutable_all_extension_numbers_response();
  numbers->set_base_type_name(type->full_name());
  for (const FieldDescriptor* extension : extensions) numbers->add_extension_number(extension->number());
}

}  // namespace

absl::StatusOr<ReflectionAnswers> ReflectionAnswers::Create(std::vector<std::string> services) {
  for (const std::string& service : services) {
    if (Pool().FindServiceByName(service) == nullptr) {
      return absl::InternalError(absl::StrCat("reflection: no descriptor for the served service ", service));
    }
  }
  return ReflectionAnswers(std::move(services));
}

reflection::ServerReflectionResponse ReflectionAnswers::Answer(const reflection::ServerReflectionRequest& request) const {
  reflection::ServerReflectionResponse response;
  response.set_valid_host(request.host());
  *response.mutable_original_request() = request;
  switch (request.message_request_case()) {
    case reflection::ServerReflectionRequest::kFileByFilename:
      AnswerFile(Pool().FindFileByName(request.file_by_filename()),
                 absl::StrCat("file ", request.file_by_filename()), &response);
      break;
    case reflection::ServerReflectionRequest::kFileContainingSymbol:
      AnswerFile(Pool().FindFileContainingSymbol(request.file_containing_symbol()),
                 absl::StrCat("symbol ", request.file_containing_symbol()), &response);
      break;
    case reflection::ServerReflectionRequest::kFileContainingExtension:
      AnswerExtension(request.file_containing_extension(), &response);
      break;
    case reflection::ServerReflectionRequest::kAllExtensionNumbersOfType:
      AnswerExtensionNumbers(request.all_extension_numbers_of_type(), &response);
      break;
    case reflection::ServerReflectionRequest::kListServices:
      for (const std::string& name : services_) response.mutable_list_services_response()->add_service()->set_name(name);
      break;
    default:
      SetError(absl::UnimplementedError("reflection: unknown kind of request"), &response);
  }
  return response;
}

}  // namespace mcserve::server
